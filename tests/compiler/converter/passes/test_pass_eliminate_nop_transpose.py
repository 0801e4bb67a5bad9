from onnx import helper

from compiler_test_helpers import F32, assert_same_outputs, make_model, op_types, random_feeds, run_pass


def test_identity_perm_is_removed_and_real_transposes_stay():
    nodes = [helper.make_node("Transpose", ["X"], ["a"], perm=[0, 1, 2]),
             helper.make_node("Transpose", ["a"], ["O"], perm=[2, 0, 1])]
    model = make_model(nodes, [("X", F32, [2, 3, 4])], [("O", F32, [4, 2, 3])])
    out = run_pass(model, "eliminate_nop_transpose")
    assert op_types(out) == ["Transpose"] and out.graph.node[0].input[0] == "X"
    assert_same_outputs(model, out, random_feeds(model))


def test_default_perm_is_a_nop_only_for_rank_one():
    nodes = [helper.make_node("Transpose", ["X"], ["a"]), helper.make_node("Transpose", ["Y"], ["b"]),
             helper.make_node("Add", ["a", "a"], ["O"]), helper.make_node("Relu", ["b"], ["P"])]
    model = make_model(nodes, [("X", F32, [5]), ("Y", F32, [2, 3])], [("O", F32, [5]), ("P", F32, [3, 2])])
    out = run_pass(model, "eliminate_nop_transpose")
    assert op_types(out) == ["Transpose", "Add", "Relu"] and out.graph.node[0].input[0] == "Y"
    assert_same_outputs(model, out, random_feeds(model))
