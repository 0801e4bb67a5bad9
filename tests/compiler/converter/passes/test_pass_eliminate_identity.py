import numpy as np
from onnx import helper

from compiler_test_helpers import F32, assert_same_outputs, make_model, op_types, random_feeds, run_pass


def test_inner_identities_are_removed():
    nodes = [helper.make_node("Identity", ["X"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Identity", ["b"], ["c"]), helper.make_node("Add", ["c", "a"], ["O"])]
    model = make_model(nodes, [("X", F32, [2, 3])], [("O", F32, [2, 3])])
    out = run_pass(model, "eliminate_identity")
    assert op_types(out) == ["Relu", "Add"]
    assert list(out.graph.node[1].input) == ["b", "X"]
    assert_same_outputs(model, out, random_feeds(model))


def test_identity_writing_a_graph_output_renames_the_producer():
    nodes = [helper.make_node("Relu", ["X"], ["r"]), helper.make_node("Identity", ["r"], ["O"])]
    model = make_model(nodes, [("X", F32, [4])], [("O", F32, [4])])
    out = run_pass(model, "eliminate_identity")
    assert op_types(out) == ["Relu"] and list(out.graph.node[0].output) == ["O"]
    assert [o.name for o in out.graph.output] == ["O"]
    assert_same_outputs(model, out, random_feeds(model))


def test_identity_from_an_input_or_constant_to_an_output_stays():
    # Without it the output would have no tensor of its own (anchor names must be distinct).
    nodes = [helper.make_node("Identity", ["X"], ["O"]), helper.make_node("Identity", ["W"], ["P"])]
    model = make_model(nodes, [("X", F32, [2])], [("O", F32, [2]), ("P", F32, [2])], {"W": np.ones(2, np.float32)})
    out = run_pass(model, "eliminate_identity")
    assert op_types(out) == ["Identity", "Identity"]
    assert_same_outputs(model, out, random_feeds(model))
