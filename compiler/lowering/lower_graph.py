"""ONNX model -> LoweredGraph: a topological schedule of kernel steps over typed tensors.
Graph inputs become `input` tensors, graph outputs `output` tensors, constants `weight`
tensors (their bytes go to the shared WeightStore) and everything else `arena` tensors."""
from typing import List, Optional

import onnx

from compiler.errors import LoweringError
from compiler.lowering.control_flow import PrepareBody, lower_control_flow
from compiler.lowering.ir import KernelStep, LoweredGraph, TensorValue
from compiler.lowering.weights import WeightStore
from compiler.lowering_rules import find_rule, is_control_flow
from compiler.lowering_rules.node_context import NodeContext
from compiler.onnx_graph.constants import Constants, is_constant_node
from compiler.onnx_graph.graph_edit import opset_version, runtime_inputs
from compiler.onnx_graph.tensor_types import DTYPE_NAMES, TensorType
from compiler.onnx_graph.topo_order import topological_order
from compiler.onnx_graph.type_inference import infer_types


def lower_graph(model: onnx.ModelProto, weights: WeightStore, model_name: str = "<model>",
                name: str = "graph0", batch_size: Optional[int] = None, batch_axis: int = 0,
                prepare_body: Optional[PrepareBody] = None) -> LoweredGraph:
    """batch_size None: the batch is dim `batch_axis` of the first input that has it (else 1).
    Every node is lowered as it is (the kernel fusion stage runs before, when wanted).
    prepare_body: folds and shape-infers a run-time If/Loop body (a standalone model) before it
    is lowered; a model with such nodes needs it."""
    return _GraphLowerer(model, weights, model_name, prepare_body).lower(name, batch_size, batch_axis)


class _GraphLowerer:
    def __init__(self, model: onnx.ModelProto, weights: WeightStore, model_name: str,
                 prepare_body: Optional[PrepareBody]):
        self.graph = model.graph
        self.opset = opset_version(model)
        self.opset_import = list(model.opset_import)
        self.ir_version = model.ir_version
        self.types = infer_types(model, model_name=model_name).types
        self.constants = Constants(self.graph, self.opset, model_name)
        self.weights = weights
        self.model_name = model_name
        self.prepare_body = prepare_body
        self.lowered: LoweredGraph = None
        self.steps: List[KernelStep] = None  # the program being filled (a sub-program's for bodies)

    def lower(self, name: str, batch_size: Optional[int], batch_axis: int) -> LoweredGraph:
        self.lowered = LoweredGraph(name, batch_axis=batch_axis)
        self.steps = self.lowered.steps
        self._add_inputs()
        outputs = self._output_names()
        nodes = list(self.graph.node)
        for idx in topological_order(self.graph, self.model_name):
            if not is_constant_node(nodes[idx]):  # constants are weights, not steps
                self._lower_node(nodes[idx], outputs)
        self._add_output_copies(outputs)
        self.lowered.outputs = outputs
        self.lowered.batch_size = int(batch_size) if batch_size is not None else self._batch_from_inputs(batch_axis)
        return self.lowered

    def _runtime_type(self, tensor: str, what: str) -> TensorType:
        t = self.types.get(tensor)
        if t is None or not t.is_static:
            raise LoweringError(f"{self.model_name}: {what} '{tensor}' has "
                                f"{'no known shape' if t is None else 'a non-static shape ' + t.shape_text()}; "
                                f"all shapes must be static (run shape_inference, set --input_shape)")
        if t.elem_type not in DTYPE_NAMES:
            raise LoweringError(f"{self.model_name}: {what} '{tensor}' has dtype {t.dtype_name}, which the emulator "
                                f"does not support ({', '.join(DTYPE_NAMES.values())})")
        return t

    def _weight(self, tensor: str) -> TensorValue:
        if tensor not in self.lowered.tensors:
            value = self.constants.value(tensor)
            if value.dtype.name not in DTYPE_NAMES.values():
                raise LoweringError(f"{self.model_name}: constant '{tensor}' has dtype {value.dtype}, which the "
                                    f"emulator does not support")
            stored = self.weights.add(tensor, value)
            self.lowered.add(TensorValue(tensor, value.dtype.name, tuple(value.shape), "weight",
                                         weight_key=stored.key))
        return self.lowered.tensors[tensor]

    def _add_inputs(self) -> None:
        for inp in runtime_inputs(self.graph):
            t = self._runtime_type(inp.name, "graph input")
            self.lowered.add(TensorValue(inp.name, t.dtype_name, tuple(t.shape), "input", anchor=inp.name))
            self.lowered.inputs.append(inp.name)

    def _output_names(self):
        names = [o.name for o in self.graph.output]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise LoweringError(f"{self.model_name}: graph output(s) {', '.join(duplicated)} listed more than once")
        # Anchors are looked up by name whatever their direction, so an output cannot reuse an
        # input's name (ONNX allows a graph output that is directly a graph input).
        both = [n for n in self.lowered.inputs if n in names]
        if both:
            raise LoweringError(f"{self.model_name}: '{both[0]}' is both a graph input and a graph output; PopEF "
                                f"anchor names must be distinct, so give the output its own tensor (e.g. an Identity "
                                f"node writing a new name)")
        return names

    def _lower_node(self, node: onnx.NodeProto, outputs) -> None:
        if is_control_flow(node):
            self.steps.append(lower_control_flow(self, node, outputs))
            return
        rule = find_rule(node, self.model_name)
        call = rule(NodeContext(node, self.opset, self.types, self.constants, self.model_name))
        for tensor in call.inputs:
            if tensor not in self.lowered.tensors:
                if tensor not in self.constants:
                    raise LoweringError(f"{self.model_name}: node '{node.name}' ({node.op_type}) reads '{tensor}', "
                                        f"which no earlier step produces")
                self._weight(tensor)
        step_outputs = []
        for out in node.output:
            if not out:
                continue
            t = self._runtime_type(out, f"output of node '{node.name}' ({node.op_type})")
            storage = "output" if out in outputs else "arena"
            self.lowered.add(TensorValue(out, t.dtype_name, tuple(t.shape), storage,
                                         anchor=out if storage == "output" else None))
            step_outputs.append(out)
        self.steps.append(KernelStep(call.op, node.name, list(call.inputs), step_outputs, dict(call.attrs)))

    def body_lowerer(self, model: onnx.ModelProto, model_name: str) -> "SubprogramLowerer":
        """The lowerer of a control-flow body of this program (compiler/lowering/control_flow.py)."""
        return SubprogramLowerer(self, model, model_name)

    def _add_output_copies(self, outputs) -> None:
        """An output that is a constant has no step writing it: a Reshape step copies it (a node
        output that later steps also read is simply written to the output buffer)."""
        for out in outputs:
            produced = self.lowered.tensors.get(out)
            if produced is not None and produced.storage == "output":
                continue
            if produced is None and out in self.constants:
                produced = self._weight(out)
            if produced is None:
                raise LoweringError(f"{self.model_name}: graph output '{out}' is not produced by any node and is "
                                    f"neither an input nor a constant")
            copy_name = f"{out}:output"
            self.lowered.add(TensorValue(copy_name, produced.dtype, produced.shape, "output", anchor=out))
            self.lowered.steps.append(KernelStep("Reshape", f"copy_to_output:{out}", [produced.name], [copy_name], {}))

    def _batch_from_inputs(self, batch_axis: int) -> int:
        for name in self.lowered.inputs:
            shape = self.lowered.tensors[name].shape
            if len(shape) > batch_axis:
                return int(shape[batch_axis])
        return 1


class SubprogramLowerer(_GraphLowerer):
    """Lowers a control-flow body (a standalone model, compiler/lowering/control_flow.py) into
    its own list of steps over the enclosing LoweredGraph's tensors. Its formal inputs become
    arena tensors; the enclosing program's tensors it reads are already there; it has no anchors."""

    def __init__(self, parent: _GraphLowerer, model: onnx.ModelProto, model_name: str):
        super().__init__(model, parent.weights, model_name, parent.prepare_body)
        self.lowered = parent.lowered
        self.steps = []

    def lower_body(self, formal_inputs) -> List[KernelStep]:
        for name in formal_inputs:
            t = self._runtime_type(name, "body input")
            self.lowered.add(TensorValue(name, t.dtype_name, tuple(t.shape), "arena"))
        nodes = list(self.graph.node)
        for idx in topological_order(self.graph, self.model_name):
            if not is_constant_node(nodes[idx]):
                self._lower_node(nodes[idx], ())
        return self.steps
