"""The lowering's internal representation: one ONNX model becomes one LoweredGraph (a list of
kernel steps over named tensors). Model fusion combines several LoweredGraphs as subgraphs of
one executable that share a WeightStore; each keeps its own arena plan (only one subgraph runs
at a time, so the executable's arena is the largest of them)."""
import dataclasses
import math
from typing import Dict, List, Optional, Tuple

import numpy as np

STORAGES = ("input", "output", "weight", "arena")


@dataclasses.dataclass
class TensorValue:
    name: str                         # unique within its LoweredGraph
    dtype: str                        # PopEF dtype name, e.g. "float32"
    shape: Tuple[int, ...]
    storage: str                      # one of STORAGES
    anchor: Optional[str] = None      # input/output: the anchor it is bound to
    weight_key: Optional[str] = None  # weight: key of its bytes in the WeightStore
    aliases: List[str] = dataclasses.field(default_factory=list)  # other anchor names (fusion: graph0/X)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize  # exact: no int64 wrap-around


@dataclasses.dataclass
class KernelStep:
    op: str                 # kernel op of docs/popef.md §3
    name: str               # ONNX node name (or a generated one for inserted copies)
    inputs: List[str]       # tensor names
    outputs: List[str]
    attrs: Dict[str, object]


@dataclasses.dataclass
class ControlStep(KernelStep):
    """A run-time If or Loop (docs/popef.md §3 "Control flow"): `inputs` are every tensor of the
    enclosing program it reads (also those its sub-programs read), `outputs` the tensors it
    writes there. `programs` maps a role ("then", "else", "body") to the sub-program's steps;
    `tensor_attrs` are step fields naming tensors (emitted as ids: a name, a list of names, or a
    list of name lists); `pinned` are sub-program tensors that must keep their bytes for the
    whole run of the sub-program (a loop body's inputs and results)."""
    programs: Dict[str, List[KernelStep]] = dataclasses.field(default_factory=dict)
    tensor_attrs: Dict[str, object] = dataclasses.field(default_factory=dict)
    pinned: List[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class LoweredGraph:
    name: str                                        # subgraph name, e.g. "graph0"
    tensors: Dict[str, TensorValue] = dataclasses.field(default_factory=dict)
    steps: List[KernelStep] = dataclasses.field(default_factory=list)  # in schedule order
    inputs: List[str] = dataclasses.field(default_factory=list)   # input anchor names, in order
    outputs: List[str] = dataclasses.field(default_factory=list)  # output anchor names, in order
    batch_size: int = 1
    batch_axis: int = 0

    def add(self, tensor: TensorValue) -> TensorValue:
        assert tensor.storage in STORAGES, tensor.storage
        assert tensor.name not in self.tensors, f"tensor '{tensor.name}' added twice"
        self.tensors[tensor.name] = tensor
        return tensor

    def anchor_tensors(self, storage: str) -> List[TensorValue]:
        return [t for t in self.tensors.values() if t.storage == storage]

    def anchor_batch_axis(self, tensor: TensorValue) -> int:
        """The anchor's batch axis: batch_axis when its rank has it and that dim is the
        compiled batch size, else -1 (e.g. an output reshaped to (2,))."""
        axis = self.batch_axis
        return axis if len(tensor.shape) > axis and tensor.shape[axis] == self.batch_size else -1
