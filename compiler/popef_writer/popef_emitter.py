"""LoweredGraphs + their arena plans + the WeightStore -> the PopEF Metadata and Executable JSON
(docs/popef.md §2, §3) and the file's blobs.

One subgraph without an index anchor: `main` holds its steps and the subgraph's program is
"main". Several subgraphs, or any number with an index anchor (model fusion, even of one model):
subgraph i runs as its own program "graph{i}" (not its name, which the user chooses and could be
"main" or "load") and `main` is a single Switch step on the index input anchor. Tensor ids are
global; the arena is shared by the subgraphs (one runs at a time), so its size is the largest plan.
If/Loop steps (ControlStep) add their sub-programs as `<subgraph program>/<node>/<role>` and
make the Executable version 2 (docs/popef.md §3 "Control flow").
"""
import dataclasses
from typing import Dict, List, Optional, Sequence, Tuple

from compiler.lowering.ir import ControlStep, LoweredGraph
from compiler.lowering.memory_plan import ArenaPlan
from compiler.lowering.weights import WeightStore
from compiler.version import PRODUCER
from popef.format import BlobType
from popef.writer import encode_popef, json_payload

# Executable JSON "version": 2 adds the If and Loop steps (docs/popef.md §3); an executable
# without them stays version 1 so that older runtimes keep loading it.
BASE_VERSION = 1
CONTROL_FLOW_VERSION = 2


@dataclasses.dataclass(frozen=True)
class IndexAnchor:
    """The input anchor selecting the subgraph of a fused executable."""
    name: str
    dtype: str
    shape: Tuple[int, ...]


@dataclasses.dataclass
class EmittedPopef:
    metadata: dict
    executable: dict
    data: bytes


def emit_popef(subgraphs: Sequence[LoweredGraph], plans: Sequence[ArenaPlan], weights: WeightStore,
               ipu_version: str, num_ipus: int, opaques: Optional[Dict[str, object]] = None,
               index_anchor: Optional[IndexAnchor] = None) -> EmittedPopef:
    assert subgraphs and len(subgraphs) == len(plans)
    fused = len(subgraphs) > 1 or index_anchor is not None
    if fused and index_anchor is None:
        raise ValueError("several subgraphs need an index anchor to select one")
    arena_bytes = max(p.size for p in plans)
    tensors: List[dict] = []
    programs: Dict[str, list] = {"load": [{"op": "LoadTensorData", "tensor_data": w.name, "offset": w.offset,
                                           "nbytes": w.nbytes} for w in weights.entries]}
    subgraph_table, anchors = [], []
    has_control_flow = False
    if fused:
        programs["main"] = [{"op": "Switch", "index_anchor": index_anchor.name,
                             "cases": [fused_program_name(i) for i in range(len(subgraphs))]}]
        anchors.append({"name": index_anchor.name, "dtype": index_anchor.dtype, "shape": list(index_anchor.shape),
                        "direction": "input", "subgraph": None, "batch_axis": -1, "aliases": []})
    for index, (graph, plan) in enumerate(zip(subgraphs, plans)):
        ids = {}
        for t in graph.tensors.values():
            entry = {"id": len(tensors), "name": t.name, "dtype": t.dtype, "shape": list(t.shape), "storage": t.storage}
            if t.storage in ("input", "output"):
                entry["anchor"] = t.anchor
            elif t.storage == "weight":
                entry["offset"] = weights.get(t.weight_key).offset
            else:
                entry["offset"] = plan.offsets[t.name]
            ids[t.name] = entry["id"]
            tensors.append(entry)
        program = fused_program_name(index) if fused else "main"
        has_control_flow |= _emit_program(program, graph.steps, ids, programs, plan.in_place)
        subgraph_table.append({"index": index, "name": graph.name, "program": program,
                               "batch_size": graph.batch_size, "batch_axis": graph.batch_axis,
                               "inputs": list(graph.inputs), "outputs": list(graph.outputs)})
        for storage, direction in (("input", "input"), ("output", "output")):
            for t in graph.anchor_tensors(storage):
                anchors.append({"name": t.anchor, "dtype": t.dtype, "shape": list(t.shape), "direction": direction,
                                "subgraph": index, "batch_axis": graph.anchor_batch_axis(t),
                                "aliases": list(t.aliases)})
    programs["save"] = []
    _order_anchors(anchors, subgraphs)
    executable = {"version": CONTROL_FLOW_VERSION if has_control_flow else BASE_VERSION,
                  "weights_bytes": weights.size, "arena_bytes": arena_bytes, "tensors": tensors,
                  "programs": programs, "subgraphs": subgraph_table}
    metadata = {
        "producer": PRODUCER, "ipu_version": ipu_version, "num_ipus": num_ipus, "replication_factor": 1,
        "is_inference": True, "batch_size": subgraphs[0].batch_size, "batch_axis": subgraphs[0].batch_axis,
        "anchors": anchors, "program_flow": {"load": ["load"], "main": ["main"], "save": ["save"]},
        "tensor_data": [{"name": w.name, "dtype": w.dtype, "shape": list(w.shape), "nbytes": w.nbytes}
                        for w in weights.entries],
        "device_memory": {"weights_bytes": weights.size, "arena_bytes": arena_bytes,
                          "total_bytes": weights.size + arena_bytes},
    }
    blobs = [(BlobType.METADATA, "metadata", json_payload(metadata)),
             (BlobType.EXECUTABLE, "executable", json_payload(executable))]
    blobs += [(BlobType.TENSOR_DATA, w.name, w.data.tobytes()) for w in weights.entries]
    blobs += [(BlobType.OPAQUE, name, json_payload(content)) for name, content in (opaques or {}).items()]
    return EmittedPopef(metadata, executable, encode_popef(blobs))


def _emit_program(name: str, steps, ids: Dict[str, int], programs: Dict[str, list], in_place: Dict[str, int],
                  root: Optional[str] = None) -> bool:
    """Adds program `name` and, for each If/Loop step, its sub-programs `<root>/<node>/<role>`
    (root: the subgraph's program; nested steps' names already carry their body's path). True
    when the program has control-flow steps. `in_place`: the plan's in-place outputs."""
    root = root or name
    emitted = []
    programs[name] = emitted  # reserved before the sub-programs so their names never take it
    control = False
    for s in steps:
        step = {"op": s.op, "name": s.name, "inputs": [ids[n] for n in s.inputs],
                "outputs": [ids[n] for n in s.outputs], "attrs": s.attrs}
        if s.outputs and s.outputs[0] in in_place:
            step["in_place_input"] = in_place[s.outputs[0]]
        if isinstance(s, ControlStep):  # its fields sit in the step itself (docs/popef.md §3)
            control = True
            del step["attrs"]
            step.update(s.attrs)
            for role, sub_steps in s.programs.items():
                sub_name = base = f"{root}/{s.name}/{role}"
                k = 0
                while sub_name in programs:
                    k += 1
                    sub_name = f"{base}#{k}"
                _emit_program(sub_name, sub_steps, ids, programs, in_place, root)
                step[role] = sub_name
            for key, value in s.tensor_attrs.items():
                step[key] = _tensor_ids(value, ids)
        emitted.append(step)
    return control


def _tensor_ids(value, ids: Dict[str, int]):
    """A tensor name, or nested lists of them, as ids; None (no tensor) is -1."""
    if value is None:
        return -1
    if isinstance(value, str):
        return ids[value]
    return [_tensor_ids(v, ids) for v in value]


def fused_program_name(index: int) -> str:
    return f"graph{index}"


def _order_anchors(anchors: List[dict], subgraphs: Sequence[LoweredGraph]) -> None:
    """Anchors in the ONNX graphs' input then output order (tensor creation order follows the
    schedule, not the declaration order of graph outputs)."""
    rank = {}
    for index, graph in enumerate(subgraphs):
        for pos, name in enumerate(graph.inputs):
            rank[("input", index, name)] = (index, 0, pos)
        for pos, name in enumerate(graph.outputs):
            rank[("output", index, name)] = (index, 1, pos)
    anchors.sort(key=lambda a: (-1, 0, 0) if a["subgraph"] is None else rank[(a["direction"], a["subgraph"], a["name"])])
