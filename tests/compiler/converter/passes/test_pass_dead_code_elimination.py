import numpy as np
from onnx import helper

from compiler_test_helpers import F32, assert_same_outputs, make_model, op_types, random_feeds, run_pass


def test_nodes_not_reaching_an_output_are_removed():
    nodes = [helper.make_node("Relu", ["X"], ["a"], name="used"),
             helper.make_node("Sigmoid", ["X"], ["dead1"], name="dead1"),
             helper.make_node("Tanh", ["dead1"], ["dead2"], name="dead2"),
             helper.make_node("Add", ["a", "X"], ["O"], name="out")]
    model = make_model(nodes, [("X", F32, [3])], [("O", F32, [3])],
                       value_info=[helper.make_tensor_value_info("dead1", F32, [3])])
    out = run_pass(model, "dead_code_elimination")
    assert [n.name for n in out.graph.node] == ["used", "out"]
    assert [vi.name for vi in out.graph.value_info] == []
    assert_same_outputs(model, out, random_feeds(model))


def test_works_on_unsorted_graphs_and_keeps_every_output_chain():
    nodes = [helper.make_node("Add", ["a", "b"], ["O"]), helper.make_node("Relu", ["X"], ["a"]),
             helper.make_node("Neg", ["X"], ["b"]), helper.make_node("Abs", ["X"], ["P"]),
             helper.make_node("Exp", ["X"], ["unused"])]
    model = make_model(nodes, [("X", F32, [2])], [("O", F32, [2]), ("P", F32, [2])])
    out = run_pass(model, "dead_code_elimination")
    assert op_types(out) == ["Add", "Relu", "Neg", "Abs"]


def test_outer_scope_reads_of_a_subgraph_keep_their_producers():
    then_graph = helper.make_graph([helper.make_node("Identity", ["r"], ["t"])], "then", [],
                                   [helper.make_tensor_value_info("t", F32, [2])])
    else_graph = helper.make_graph([helper.make_node("Identity", ["X"], ["e"])], "else", [],
                                   [helper.make_tensor_value_info("e", F32, [2])])
    nodes = [helper.make_node("Relu", ["X"], ["r"]),
             helper.make_node("If", ["cond"], ["O"], then_branch=then_graph, else_branch=else_graph)]
    model = make_model(nodes, [("X", F32, [2])], [("O", F32, [2])], {"cond": np.array(True)})
    out = run_pass(model, "dead_code_elimination")
    assert op_types(out) == ["Relu", "If"]
