"""What a lowering rule sees of one ONNX node: its tensors' static types, attributes with
defaults, constant inputs, the opset, and helpers that raise errors naming the node."""
import dataclasses
from typing import Dict, List, Optional, Sequence

import numpy as np
import onnx
from onnx import helper

from compiler.errors import LoweringError
from compiler.onnx_graph.constants import Constants
from compiler.onnx_graph.tensor_types import TensorType


@dataclasses.dataclass
class KernelCall:
    """A rule's answer: which kernel runs, on which of the node's tensors, with which attrs.
    The step's outputs are the node's outputs."""
    op: str
    inputs: List[str]
    attrs: Dict[str, object] = dataclasses.field(default_factory=dict)


class NodeContext:
    def __init__(self, node: onnx.NodeProto, opset: int, types: Dict[str, TensorType], constants: Constants,
                 model_name: str):
        self.node = node
        self.opset = opset
        self.constants = constants
        self.model_name = model_name
        self._types = types
        self._attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}

    @property
    def where(self) -> str:
        return f"{self.model_name}: node '{self.node.name}' ({self.node.op_type})"

    def error(self, message: str) -> LoweringError:
        return LoweringError(f"{self.where}: {message}")

    def attr(self, name: str, default=None):
        return self._attrs.get(name, default)

    def has_input(self, i: int) -> bool:
        return i < len(self.node.input) and self.node.input[i] != ""

    def input_type(self, i: int) -> TensorType:
        return self._type(self.node.input[i])

    def output_type(self, i: int = 0) -> TensorType:
        return self._type(self.node.output[i])

    def _type(self, name: str) -> TensorType:
        t = self._types.get(name)
        if t is None or not t.is_static:
            raise self.error(f"tensor '{name}' has no static shape "
                             f"({'unknown' if t is None else t.shape_text()}); run shape_inference")
        return t

    def rank(self, i: int = 0) -> int:
        return len(self.input_type(i).shape)

    def require_inputs(self, low: int, high: Optional[int] = None) -> None:
        n = len([x for x in self.node.input])
        high = low if high is None else high
        if not low <= n <= high:
            expected = str(low) if low == high else f"{low} to {high}"
            raise self.error(f"expected {expected} inputs, got {n}")

    def require_dtypes(self, allowed: Sequence[str], indices: Optional[Sequence[int]] = None) -> None:
        indices = range(len(self.node.input)) if indices is None else indices
        for i in indices:
            if not self.has_input(i):
                continue
            dtype = self.input_type(i).dtype_name
            if dtype not in allowed:
                raise self.error(f"input '{self.node.input[i]}' has dtype {dtype}; the emulator's "
                                 f"{self.node.op_type} supports {', '.join(allowed)}")

    def constant_input(self, i: int) -> np.ndarray:
        """The value of input i, which must be a constant once constant folding has run."""
        name = self.node.input[i]
        if name not in self.constants:
            raise self.error(f"input '{name}' must be a constant (it is computed at run time); "
                             f"run constant_folding, or fix the model's input shapes so it can be folded")
        return self.constants.value(name)

    def normalize_axis(self, axis: int, rank: int, what: str = "axis") -> int:
        if not -rank <= axis < max(rank, 1):
            raise self.error(f"{what} {axis} is out of range for rank {rank}")
        return axis + rank if axis < 0 else axis
