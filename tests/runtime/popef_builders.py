"""Hand-written PopEF files for the runtime tests, built with the compiler's writer exactly as
docs/popef.md describes (no dependency on the compiler's lowering)."""
import copy
import json
from typing import Dict, List, Optional, Sequence

import numpy as np

from popef.format import BlobType
from popef.reader import PopefFile
from popef.writer import encode_popef, json_payload

ALIGN = 64


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def anchor(name, dtype, shape, direction, subgraph=0, batch_axis=0, aliases=()):
    return {"name": name, "dtype": dtype, "shape": list(shape), "direction": direction,
            "subgraph": subgraph, "batch_axis": batch_axis, "aliases": list(aliases)}


class PopefModel:
    """Metadata + Executable JSON + TensorData; `to_bytes()` encodes the file, so an instance
    also stands in for the compiler's Executable object."""

    def __init__(self, metadata: dict, executable: dict, tensor_data: Optional[Dict[str, np.ndarray]] = None):
        self.metadata = metadata
        self.executable = executable
        self.tensor_data = dict(tensor_data or {})

    def copy(self) -> "PopefModel":
        return PopefModel(copy.deepcopy(self.metadata), copy.deepcopy(self.executable),
                          {k: v.copy() for k, v in self.tensor_data.items()})

    def blobs(self):
        out = [(BlobType.METADATA, "metadata", json_payload(self.metadata)),
               (BlobType.EXECUTABLE, "executable", json_payload(self.executable))]
        for name, arr in self.tensor_data.items():
            out.append((BlobType.TENSOR_DATA, name, np.ascontiguousarray(arr).tobytes()))
        out.append((BlobType.OPAQUE, "compiler", json_payload({"producer": "tests/runtime"})))
        return out

    def to_bytes(self) -> bytes:
        return encode_popef(self.blobs())

    def write(self, path) -> str:
        with open(path, "wb") as f:
            f.write(self.to_bytes())
        return str(path)


def _model(anchors: List[dict], tensors: List[dict], programs: Dict[str, list], subgraphs: List[dict], *,
           ipu_version: str, weights_bytes: int = 0, arena_bytes: int = 0,
           tensor_data: Optional[Dict[str, np.ndarray]] = None) -> PopefModel:
    tensor_data = tensor_data or {}
    metadata = {
        "producer": "tests/runtime",
        "ipu_version": ipu_version,
        "num_ipus": 1,
        "replication_factor": 1,
        "is_inference": True,
        "batch_size": subgraphs[0]["batch_size"],
        "batch_axis": subgraphs[0]["batch_axis"],
        "anchors": anchors,
        "program_flow": {"load": ["load"], "main": ["main"], "save": ["save"]},
        "tensor_data": [{"name": n, "dtype": str(a.dtype), "shape": list(a.shape), "nbytes": a.nbytes}
                        for n, a in tensor_data.items()],
        "device_memory": {"weights_bytes": weights_bytes, "arena_bytes": arena_bytes,
                          "total_bytes": weights_bytes + arena_bytes},
    }
    programs = dict(programs)
    programs.setdefault("load", [])
    programs.setdefault("save", [])
    executable = {"version": 1, "weights_bytes": weights_bytes, "arena_bytes": arena_bytes,
                  "tensors": tensors, "programs": programs, "subgraphs": subgraphs}
    return PopefModel(metadata, executable, tensor_data)


def binary_model(op: str = "Add", shape: Sequence[int] = (4, 2), dtype: str = "float32", batch_axis: int = 0,
                 ipu_version: str = "ipu2", output_batch_axis: Optional[int] = None) -> PopefModel:
    """O = X <op> Y, all of `shape`; the subgraph's batch is shape[batch_axis]."""
    out_axis = batch_axis if output_batch_axis is None else output_batch_axis
    anchors = [anchor("X", dtype, shape, "input", batch_axis=batch_axis),
               anchor("Y", dtype, shape, "input", batch_axis=batch_axis),
               anchor("O", dtype, shape, "output", batch_axis=out_axis)]
    tensors = [{"id": 0, "name": "X", "dtype": dtype, "shape": list(shape), "storage": "input", "anchor": "X"},
               {"id": 1, "name": "Y", "dtype": dtype, "shape": list(shape), "storage": "input", "anchor": "Y"},
               {"id": 2, "name": "O", "dtype": dtype, "shape": list(shape), "storage": "output", "anchor": "O"}]
    main = [{"op": op, "name": op.lower(), "inputs": [0, 1], "outputs": [2], "attrs": {}}]
    batch = shape[batch_axis] if batch_axis >= 0 else 1
    subgraphs = [{"index": 0, "name": "graph0", "program": "main", "batch_size": batch, "batch_axis": batch_axis,
                  "inputs": ["X", "Y"], "outputs": ["O"]}]
    return _model(anchors, tensors, {"main": main}, subgraphs, ipu_version=ipu_version)


def add_model(shape=(4, 2), dtype="float32", batch_axis=0, ipu_version="ipu2") -> PopefModel:
    return binary_model("Add", shape, dtype, batch_axis, ipu_version)


def weight_model(weight: np.ndarray, ipu_version: str = "ipu2", arena_bytes: int = None) -> PopefModel:
    """O = (X + W) * X with W a TensorData weight and the sum in the arena; X, O: weight.shape."""
    shape = list(weight.shape)
    nbytes = weight.nbytes
    anchors = [anchor("X", "float32", shape, "input"), anchor("O", "float32", shape, "output")]
    tensors = [{"id": 0, "name": "X", "dtype": "float32", "shape": shape, "storage": "input", "anchor": "X"},
               {"id": 1, "name": "W", "dtype": "float32", "shape": shape, "storage": "weight", "offset": 0},
               {"id": 2, "name": "h", "dtype": "float32", "shape": shape, "storage": "arena", "offset": 0},
               {"id": 3, "name": "O", "dtype": "float32", "shape": shape, "storage": "output", "anchor": "O"}]
    programs = {
        "load": [{"op": "LoadTensorData", "tensor_data": "W", "offset": 0, "nbytes": nbytes}],
        "main": [{"op": "Add", "name": "add", "inputs": [0, 1], "outputs": [2], "attrs": {}},
                 {"op": "Mul", "name": "mul", "inputs": [2, 0], "outputs": [3], "attrs": {}}],
    }
    subgraphs = [{"index": 0, "name": "graph0", "program": "main", "batch_size": shape[0], "batch_axis": 0,
                  "inputs": ["X"], "outputs": ["O"]}]
    return _model(anchors, tensors, programs, subgraphs, ipu_version=ipu_version, weights_bytes=_align(nbytes),
                  arena_bytes=_align(nbytes) if arena_bytes is None else arena_bytes,
                  tensor_data={"W": weight.astype(np.float32)})


def flatten_output_model(ipu_version: str = "ipu2") -> PopefModel:
    """O = reshape(X + Y, (2,)) with X, Y: [1, 2]; O has no batch axis (as in the seeds' fusion
    model0), so the model accepts only its exact shapes."""
    anchors = [anchor("X", "float32", [1, 2], "input"), anchor("Y", "float32", [1, 2], "input"),
               anchor("O", "float32", [2], "output", batch_axis=-1)]
    tensors = [{"id": 0, "name": "X", "dtype": "float32", "shape": [1, 2], "storage": "input", "anchor": "X"},
               {"id": 1, "name": "Y", "dtype": "float32", "shape": [1, 2], "storage": "input", "anchor": "Y"},
               {"id": 2, "name": "s", "dtype": "float32", "shape": [1, 2], "storage": "arena", "offset": 0},
               {"id": 3, "name": "O", "dtype": "float32", "shape": [2], "storage": "output", "anchor": "O"}]
    main = [{"op": "Add", "name": "add", "inputs": [0, 1], "outputs": [2], "attrs": {}},
            {"op": "Reshape", "name": "reshape", "inputs": [2], "outputs": [3], "attrs": {}}]
    subgraphs = [{"index": 0, "name": "graph0", "program": "main", "batch_size": 1, "batch_axis": 0,
                  "inputs": ["X", "Y"], "outputs": ["O"]}]
    return _model(anchors, tensors, {"main": main}, subgraphs, ipu_version=ipu_version, arena_bytes=64)


def fused_model(index_dtype: str = "int32", index_shape=(1,), ipu_version: str = "ipu2") -> PopefModel:
    """Two subgraphs behind a Switch on `index`, with different compiled batch sizes:
    graph0 (batch 4): graph0/O = graph0/X + graph0/Y, [4, 2] float32;
    graph1 (batch 2): graph1/O = (graph1/X + graph1/Y) * graph1/X, [2, 3] float32 (sum in the arena).
    Anchors are named like PopRT's fusion (graph0/stream0) with the model names as aliases."""
    anchors = [
        anchor("graph0/stream0", "float32", [4, 2], "input", 0, aliases=["graph0/X"]),
        anchor("graph0/stream1", "float32", [4, 2], "input", 0, aliases=["graph0/Y"]),
        anchor("graph1/stream0", "float32", [2, 3], "input", 1, aliases=["graph1/X"]),
        anchor("graph1/stream1", "float32", [2, 3], "input", 1, aliases=["graph1/Y"]),
        anchor("index", index_dtype, list(index_shape), "input", None, batch_axis=-1),
        anchor("graph0/O", "float32", [4, 2], "output", 0),
        anchor("graph1/O", "float32", [2, 3], "output", 1),
    ]
    t = lambda i, name, shape, storage, **kw: dict(id=i, name=name, dtype="float32", shape=shape, storage=storage, **kw)
    tensors = [
        t(0, "g0x", [4, 2], "input", anchor="graph0/stream0"),
        t(1, "g0y", [4, 2], "input", anchor="graph0/stream1"),
        t(2, "g0o", [4, 2], "output", anchor="graph0/O"),
        t(3, "g1x", [2, 3], "input", anchor="graph1/stream0"),
        t(4, "g1y", [2, 3], "input", anchor="graph1/stream1"),
        t(5, "g1s", [2, 3], "arena", offset=0),
        t(6, "g1o", [2, 3], "output", anchor="graph1/O"),
        {"id": 7, "name": "index", "dtype": index_dtype, "shape": list(index_shape), "storage": "input",
         "anchor": "index"},
    ]
    programs = {
        "main": [{"op": "Switch", "index_anchor": "index", "cases": ["graph0", "graph1"]}],
        "graph0": [{"op": "Add", "name": "graph0/add", "inputs": [0, 1], "outputs": [2], "attrs": {}}],
        "graph1": [{"op": "Add", "name": "graph1/add", "inputs": [3, 4], "outputs": [5], "attrs": {}},
                   {"op": "Mul", "name": "graph1/mul", "inputs": [5, 3], "outputs": [6], "attrs": {}}],
    }
    subgraphs = [
        {"index": 0, "name": "graph0", "program": "graph0", "batch_size": 4, "batch_axis": 0,
         "inputs": ["graph0/stream0", "graph0/stream1"], "outputs": ["graph0/O"]},
        {"index": 1, "name": "graph1", "program": "graph1", "batch_size": 2, "batch_axis": 0,
         "inputs": ["graph1/stream0", "graph1/stream1"], "outputs": ["graph1/O"]},
    ]
    return _model(anchors, tensors, programs, subgraphs, ipu_version=ipu_version, arena_bytes=64)


def fused_expected(index: int, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return x + y if index == 0 else (x + y) * x


def with_edited_executable(executable, edit) -> bytes:
    """The bytes of `executable` (anything with `to_bytes()`) with `edit(doc)` applied to its
    Executable JSON and the file re-encoded (valid CRCs): a hostile or broken writer's file."""
    blobs = []
    for b in PopefFile(executable.to_bytes()).blobs:
        payload = bytes(b.payload)
        if b.type == BlobType.EXECUTABLE:
            doc = json.loads(payload)
            edit(doc)
            payload = json_payload(doc)
        blobs.append((b.type, b.name, payload))
    return encode_popef(blobs)
