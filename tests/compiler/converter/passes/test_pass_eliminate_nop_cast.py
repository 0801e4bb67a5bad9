from onnx import TensorProto, helper

from compiler_test_helpers import F32, I64, assert_same_outputs, make_model, op_types, random_feeds, run_pass


def test_cast_to_the_same_type_is_removed_and_real_casts_stay():
    nodes = [helper.make_node("Cast", ["X"], ["a"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["a"], ["b"], to=TensorProto.INT64),
             helper.make_node("Cast", ["b"], ["c"], to=TensorProto.INT64),
             helper.make_node("Add", ["c", "c"], ["O"])]
    model = make_model(nodes, [("X", F32, [5])], [("O", I64, [5])])
    out = run_pass(model, "eliminate_nop_cast")
    assert op_types(out) == ["Cast", "Add"]
    assert out.graph.node[0].input[0] == "X" and list(out.graph.node[1].input) == ["b", "b"]
    assert_same_outputs(model, out, random_feeds(model))


def test_nop_cast_writing_an_output():
    nodes = [helper.make_node("Relu", ["X"], ["r"]), helper.make_node("Cast", ["r"], ["O"], to=TensorProto.FLOAT)]
    model = make_model(nodes, [("X", F32, [3])], [("O", F32, [3])])
    out = run_pass(model, "eliminate_nop_cast")
    assert op_types(out) == ["Relu"] and out.graph.node[0].output[0] == "O"
    assert_same_outputs(model, out, random_feeds(model))
