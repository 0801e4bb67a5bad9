"""rename_subgraph on a lowered graph: prefixes, stream names, aliases, the arena plan still
valid after renaming."""
import numpy as np
import pytest
from onnx import helper

from compiler.errors import ConversionError
from compiler.fusion.anchor_names import INDEX_ANCHOR, input_alias, input_anchor, output_anchor
from compiler.fusion.subgraph_rename import AnchorRename, rename_subgraph
from compiler.lowering.lower_graph import lower_graph
from compiler.lowering.memory_plan import plan_arena
from compiler.lowering.weights import WeightStore
from compiler_test_helpers import F32, fuse_and_lower, make_model


def lowered():
    nodes = [helper.make_node("Gemm", ["X", "W", "B"], ["g"], name="gemm"),
             helper.make_node("Relu", ["g"], ["r"], name="relu"),
             helper.make_node("Add", ["r", "Y"], ["O"], name="add")]
    model = make_model(nodes, [("X", F32, [4, 3]), ("Y", F32, [4, 2])], [("O", F32, [4, 2])],
                       {"W": np.ones((3, 2), np.float32), "B": np.zeros(2, np.float32)})
    # Without kernel fusion: the steps below are the three nodes as written.
    return lower_graph(model, WeightStore(), name="ranker")


def test_names():
    assert (input_anchor(3, 1), input_alias(3, "X"), output_anchor(3, "O")) == ("graph3/stream1", "graph3/X",
                                                                              "graph3/O")
    assert (INDEX_ANCHOR.name, INDEX_ANCHOR.dtype, INDEX_ANCHOR.shape) == ("index", "int32", (1,))


def test_rename_prefixes_everything_and_renames_anchors():
    before = lowered()
    graph, renames = rename_subgraph(before, 2, "m.onnx")
    assert graph.name == "ranker" and graph.batch_size == 4
    assert set(graph.tensors) == {f"graph2/{n}" for n in before.tensors}
    x = graph.tensors["graph2/X"]
    assert (x.storage, x.anchor, x.aliases) == ("input", "graph2/stream0", ["graph2/X"])
    assert graph.tensors["graph2/O"].anchor == "graph2/O"
    w = graph.tensors["graph2/W"]
    assert w.storage == "weight" and w.weight_key == before.tensors["W"].weight_key
    assert [(s.name, s.inputs, s.outputs) for s in graph.steps] == [
        ("graph2/gemm", ["graph2/X", "graph2/W", "graph2/B"], ["graph2/g"]),
        ("graph2/relu", ["graph2/g"], ["graph2/r"]),
        ("graph2/add", ["graph2/r", "graph2/Y"], ["graph2/O"])]
    assert graph.inputs == ["graph2/stream0", "graph2/stream1"] and graph.outputs == ["graph2/O"]
    assert renames == [AnchorRename("graph2/stream0", "X", "input", ("graph2/X",)),
                       AnchorRename("graph2/stream1", "Y", "input", ("graph2/Y",)),
                       AnchorRename("graph2/O", "O", "output")]
    # The original graph is untouched and both plans agree up to the prefix.
    assert before.tensors["X"].anchor == "X"
    plan_before, plan_after = plan_arena(before), plan_arena(graph)
    assert plan_after.size == plan_before.size
    assert plan_after.offsets == {f"graph2/{n}": o for n, o in plan_before.offsets.items()}


def test_output_colliding_with_a_stream_name_is_refused():
    model = make_model([helper.make_node("Relu", ["a"], ["stream0"])], [("a", F32, [1])], [("stream0", F32, [1])])
    with pytest.raises(ConversionError, match="output 'stream0' would be the fused anchor 'graph0/stream0'"):
        rename_subgraph(fuse_and_lower(model, WeightStore()), 0, "m.onnx")
