import numpy as np
import pytest
from onnx import helper

from compiler.errors import ConversionError
from compiler_test_helpers import F32, assert_same_outputs, make_model, random_feeds, run_pass


def _model():
    return make_model([helper.make_node("Add", ["X", "Y"], ["O"])],
                      [("X", F32, ["N", 2]), ("Y", F32, ["N", 2])], [("O", F32, ["N", 2])])


def test_sets_the_given_shapes_and_keeps_numerics():
    out = run_pass(_model(), ["input_shape_override", "shape_inference"], input_shape={"X": [3, 2], "Y": [3, 2]})
    dims = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in out.graph.input}
    assert dims == {"X": [3, 2], "Y": [3, 2]}
    assert [d.dim_value for d in out.graph.output[0].type.tensor_type.shape.dim] == [3, 2]
    assert_same_outputs(_model(), out, random_feeds(out))


def test_replaces_the_whole_shape_even_a_static_one():
    model = make_model([helper.make_node("Relu", ["X"], ["O"])], [("X", F32, [1, 2])], [("O", F32, [1, 2])])
    out = run_pass(model, ["input_shape_override", "shape_inference"], input_shape={"X": [5, 2]})
    assert [d.dim_value for d in out.graph.output[0].type.tensor_type.shape.dim] == [5, 2]


def test_unknown_input_name_lists_the_inputs():
    with pytest.raises(ConversionError) as e:
        run_pass(_model(), "input_shape_override", input_shape={"Z": [1, 2]})
    msg = str(e.value)
    assert "test.onnx" in msg and "'Z'" in msg and "its inputs are: X, Y" in msg


def test_initializer_is_not_an_input_that_can_be_overridden():
    # Old models list initializers as graph inputs too; they are constants, not anchors.
    model = make_model([helper.make_node("Add", ["X", "W"], ["O"])], [("X", F32, [2]), ("W", F32, [2])],
                       [("O", F32, [2])], {"W": np.ones(2, np.float32)}, opset=11)
    with pytest.raises(ConversionError, match="its inputs are: X$"):
        run_pass(model, "input_shape_override", input_shape={"W": [2]})


def test_no_input_shape_leaves_the_model_unchanged():
    model = _model()
    assert run_pass(model, "input_shape_override") == model
