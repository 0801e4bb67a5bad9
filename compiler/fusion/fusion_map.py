"""The `fusion` Opaque blob: what a user (or a serving layer) needs to call a fused executable
without the source models: the index anchor, and per subgraph its index, name, source model,
precision, compiled batch size/axis and the map from each fused anchor name to the original.

    {"version": 1,
     "index_anchor": {"name": "index", "dtype": "int32", "shape": [1]},
     "subgraphs": [{"index": 0, "name": "graph0", "program": "graph0", "source_model": "model0.onnx",
                    "precision": "fp32", "opset": 11, "batch_size": 1, "batch_axis": 0,
                    "inputs": {"graph0/stream0": "X", "graph0/stream1": "Y"},
                    "outputs": {"graph0/O": "O"},
                    "aliases": {"graph0/stream0": ["graph0/X"], "graph0/stream1": ["graph0/Y"]}}]}
"""
import dataclasses
from typing import List, Sequence

from compiler.fusion.subgraph_rename import AnchorRename
from compiler.lowering.ir import LoweredGraph
from compiler.popef_writer import IndexAnchor, fused_program_name

FUSION_OPAQUE = "fusion"
FUSION_MAP_VERSION = 1


@dataclasses.dataclass(frozen=True)
class SubgraphOrigin:
    """Where a subgraph came from (what the LoweredGraph does not know)."""
    source_model: str
    precision: str
    opset: int


def fusion_map(index_anchor: IndexAnchor, graphs: Sequence[LoweredGraph], origins: Sequence[SubgraphOrigin],
               renames: Sequence[List[AnchorRename]]) -> dict:
    subgraphs = []
    for i, (graph, origin, names) in enumerate(zip(graphs, origins, renames)):
        subgraphs.append({
            "index": i, "name": graph.name, "program": fused_program_name(i),
            "source_model": origin.source_model, "precision": origin.precision, "opset": origin.opset,
            "batch_size": graph.batch_size, "batch_axis": graph.batch_axis,
            "inputs": {r.fused: r.original for r in names if r.direction == "input"},
            "outputs": {r.fused: r.original for r in names if r.direction == "output"},
            "aliases": {r.fused: list(r.aliases) for r in names if r.aliases},
        })
    return {"version": FUSION_MAP_VERSION,
            "index_anchor": {"name": index_anchor.name, "dtype": index_anchor.dtype, "shape": list(index_anchor.shape)},
            "subgraphs": subgraphs}
