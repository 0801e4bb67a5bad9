from onnx import helper

from compiler_test_helpers import F32, assert_same_outputs, make_model, op_types, random_feeds, run_pass


def test_two_transposes_become_one():
    nodes = [helper.make_node("Transpose", ["X"], ["a"], perm=[1, 2, 0]),
             helper.make_node("Transpose", ["a"], ["O"], perm=[0, 2, 1])]
    model = make_model(nodes, [("X", F32, [2, 3, 4])], [("O", F32, None)])
    out = run_pass(model, ["fuse_consecutive_transposes", "dead_code_elimination"])
    assert op_types(out) == ["Transpose"]
    assert list(out.graph.node[0].attribute[0].ints) == [1, 0, 2]
    assert_same_outputs(model, out, random_feeds(model))


def test_chain_of_three_and_inverse_pair_reduce_to_nothing():
    nodes = [helper.make_node("Transpose", ["X"], ["a"], perm=[1, 0, 2]),
             helper.make_node("Transpose", ["a"], ["b"]),  # default perm: reversed
             helper.make_node("Transpose", ["b"], ["c"], perm=[1, 2, 0]),
             helper.make_node("Relu", ["c"], ["O"])]
    model = make_model(nodes, [("X", F32, [2, 3, 4])], [("O", F32, None)])
    out = run_pass(model, ["fuse_consecutive_transposes", "eliminate_nop_transpose", "dead_code_elimination"])
    # [1,0,2] then [2,1,0] then [1,2,0] composes to [0,1,2]: the identity.
    assert op_types(out) == ["Relu"] and out.graph.node[0].input[0] == "X"
    assert_same_outputs(model, out, random_feeds(model))


def test_first_transpose_kept_when_something_else_reads_it():
    nodes = [helper.make_node("Transpose", ["X"], ["a"], perm=[1, 0]),
             helper.make_node("Transpose", ["a"], ["O"], perm=[1, 0]),
             helper.make_node("Relu", ["a"], ["P"])]
    model = make_model(nodes, [("X", F32, [2, 3])], [("O", F32, None), ("P", F32, None)])
    out = run_pass(model, ["fuse_consecutive_transposes", "eliminate_nop_transpose", "dead_code_elimination"])
    # The fused pair is the identity but writes an output straight from an input: it stays
    # (as a copy) since the output needs a tensor of its own.
    assert op_types(out) == ["Transpose", "Transpose", "Relu"]
    assert out.graph.node[1].input[0] == "X" and list(out.graph.node[1].attribute[0].ints) == [0, 1]
    assert_same_outputs(model, out, random_feeds(model))


def test_two_transposes_of_a_scalar_become_one_with_an_empty_perm():
    nodes = [helper.make_node("Transpose", ["X"], ["a"]), helper.make_node("Transpose", ["a"], ["O"])]
    model = make_model(nodes, [("X", F32, [])], [("O", F32, None)])
    out = run_pass(model, ["fuse_consecutive_transposes", "dead_code_elimination"])
    assert op_types(out) == ["Transpose"]
    assert out.graph.node[0].input[0] == "X" and list(out.graph.node[0].attribute[0].ints) == []
    assert_same_outputs(model, out, random_feeds(model))
