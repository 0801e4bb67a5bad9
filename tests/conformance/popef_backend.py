"""An onnx.backend.base.Backend for the ONNX backend conformance suite: `prepare` keeps the
model, `run` compiles it with `Compiler` (the default converter pipeline + lowering to PopEF)
and executes the executable with `ModelRunner` on the emulator.

Compilation happens at the first `run` because of one difference between the emulator and an
interpreter such as onnxruntime: programs are static, so operands that decide shapes or
attributes (Reshape's shape, Slice's starts, Pad's pads, Resize's scales, Clip's bounds, a
Reduce's axes...) must be constants, as they are in real exported models. The suite feeds them
as graph inputs, so the backend binds the values given for exactly those operands
(`SHAPE_OPERANDS`) as initializers before compiling — the same thing a user does by exporting
them as constants. Every other input, i.e. all the data the op computes on, is passed to the
compiled program at run time. Ops evaluated at compile time (Shape, Size, Range,
ConstantOfShape) are therefore checked through constant folding.
"""
from typing import Dict, List, Sequence, Tuple

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.base import Backend, BackendRep

from compiler import Compiler
from tf_popef_op.runtime import ModelRunner, RuntimeConfig

_REDUCE_OPS = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
               "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")
# op type -> positions of inputs that must be compile-time constants (shape/attribute operands).
SHAPE_OPERANDS: Dict[str, Tuple[int, ...]] = {
    "Reshape": (1,), "Squeeze": (1,), "Unsqueeze": (1,), "Expand": (1,), "Tile": (1,), "Split": (1,),
    "Pad": (1, 2, 3), "Slice": (1, 2, 3, 4), "Resize": (1, 2, 3), "Upsample": (1,), "Clip": (1, 2),
    "Range": (0, 1, 2), "ConstantOfShape": (0,), **{op: (1,) for op in _REDUCE_OPS},
}


def shape_operand_inputs(model: onnx.ModelProto) -> List[str]:
    """Graph inputs consumed only at SHAPE_OPERANDS positions."""
    graph_inputs = {i.name for i in model.graph.input}
    at_operand, elsewhere = set(), set()
    for node in model.graph.node:
        operands = SHAPE_OPERANDS.get(node.op_type, ()) if node.domain in ("", "ai.onnx") else ()
        for position, name in enumerate(node.input):
            if name in graph_inputs:
                (at_operand if position in operands else elsewhere).add(name)
    return sorted(at_operand - elsewhere)


class PopefBackendRep(BackendRep):
    def __init__(self, model: onnx.ModelProto):
        self.model = model
        self.input_names = [i.name for i in model.graph.input
                            if i.name not in {init.name for init in model.graph.initializer}]
        self.output_names = [o.name for o in model.graph.output]
        self._frozen = shape_operand_inputs(model)
        self._compiled: Dict[bytes, ModelRunner] = {}

    def _runner(self, feed: Dict[str, np.ndarray]) -> ModelRunner:
        key = b"".join(np.ascontiguousarray(feed[n]).tobytes() + str(feed[n].shape).encode() for n in self._frozen)
        if key not in self._compiled:
            model = onnx.ModelProto()
            model.CopyFrom(self.model)
            kept = [i for i in model.graph.input if i.name not in self._frozen]
            del model.graph.input[:]
            model.graph.input.extend(kept)
            for name in self._frozen:
                model.graph.initializer.append(numpy_helper.from_array(np.asarray(feed[name]), name))
            executable = Compiler.compile(model.SerializeToString())
            self._compiled[key] = ModelRunner(executable, RuntimeConfig())
        return self._compiled[key]

    def run(self, inputs, **kwargs) -> Tuple[np.ndarray, ...]:
        if isinstance(inputs, dict):
            feed = dict(inputs)
        else:
            inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
            feed = dict(zip(self.input_names, inputs))
        runner = self._runner(feed)
        # np.require keeps 0-d arrays 0-d (np.ascontiguousarray would make them 1-d).
        runtime_feed = {n: np.require(feed[n], requirements="C") for n in self.input_names if n not in self._frozen}
        outputs = runner.execute(runtime_feed)
        return tuple(outputs[name] for name in self.output_names)


class PopefBackend(Backend):
    @classmethod
    def is_compatible(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs) -> bool:
        return True  # unsupported ops and dtypes fail with the compiler's error, never skipped

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", **kwargs) -> PopefBackendRep:
        super().prepare(model, device, **kwargs)
        return PopefBackendRep(model)

    @classmethod
    def run_node(cls, node, inputs, device: str = "CPU", outputs_info=None, **kwargs):
        raise NotImplementedError("the emulator runs whole models; use prepare(model).run(inputs)")

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device == "CPU"


prepare = PopefBackend.prepare
supports_device = PopefBackend.supports_device
