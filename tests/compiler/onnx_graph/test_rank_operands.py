import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler.errors import ConversionError
from compiler.onnx_graph.rank_operands import MAX_RANK
from compiler.onnx_graph.type_inference import infer_types
from compiler_test_helpers import F32, make_model

I64 = TensorProto.INT64


def test_an_input_of_2pow20_elements_used_as_a_shape_is_refused_before_onnx_inference():
    # onnx's inference alone took 15 s building a rank-2^20 output (a fuzz finding)
    model = make_model([helper.make_node("Expand", ["X", "S"], ["O"], name="e")],
                       [("X", F32, [2]), ("S", F32, [1 << 20])], [("O", F32, None)])
    with pytest.raises(ConversionError, match=r"node 'e' \(Expand\): its shape operand 'S' has 1,048,576 elements, "
                                              r"so its output would have rank 1,048,576; at most 64"):
        infer_types(model)


def test_the_length_is_followed_through_elementwise_ops_and_into_loop_bodies():
    model = make_model([helper.make_node("Add", ["S", "S"], ["T"]), helper.make_node("Cast", ["T"], ["U"], to=I64),
                        helper.make_node("ConstantOfShape", ["U"], ["O"], name="c")],
                       [("S", I64, [MAX_RANK + 1])], [("O", F32, None)])
    with pytest.raises(ConversionError, match=r"node 'c' \(ConstantOfShape\): its shape operand 'U' has 65 elements"):
        infer_types(model)
    body = helper.make_graph([helper.make_node("Reshape", ["x", "s"], ["y"], name="r")], "body", [], [
        helper.make_tensor_value_info("y", F32, None)],
        [helper.make_tensor("x", F32, [1], [1.0]), helper.make_tensor("s", I64, [100], [1] * 100)])
    model = make_model([helper.make_node("If", ["C"], ["O"], then_branch=body, else_branch=body)],
                       [("C", TensorProto.BOOL, [])], [("O", F32, None)])
    with pytest.raises(ConversionError, match=r"node 'r' \(Reshape\): its shape operand 's' has 100 elements"):
        infer_types(model)


def test_shapes_up_to_the_limit_are_inferred():
    model = make_model([helper.make_node("Reshape", ["X", "S"], ["O"])], [("X", F32, [2, 3])], [("O", F32, None)],
                       initializers={"S": np.array([3, 2], np.int64)})
    assert infer_types(model).types["O"].shape == (3, 2)
