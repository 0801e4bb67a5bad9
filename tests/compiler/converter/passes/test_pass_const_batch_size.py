import pytest
from onnx import helper

from compiler.errors import ConversionError
from compiler_test_helpers import F32, assert_same_outputs, make_model, random_feeds, run_pass


def _dims(vi):
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in vi.type.tensor_type.shape.dim]


def test_sets_the_batch_dim_of_every_input():
    model = make_model([helper.make_node("Add", ["X", "Y"], ["O"])],
                       [("X", F32, ["batch", 3]), ("Y", F32, [1, 3])], [("O", F32, ["batch", 3])])
    out = run_pass(model, ["const_batch_size", "shape_inference"], batch_size=4)
    assert [_dims(i) for i in out.graph.input] == [[4, 3], [4, 3]]
    assert _dims(out.graph.output[0]) == [4, 3]


def test_batch_axis_selects_the_dim_and_short_inputs_are_left_alone():
    model = make_model([helper.make_node("Mul", ["X", "S"], ["O"])],
                       [("X", F32, [2, "b", 3]), ("S", F32, [])], [("O", F32, None)])
    out = run_pass(model, ["const_batch_size", "shape_inference"], batch_size=5, batch_axis=1)
    assert [_dims(i) for i in out.graph.input] == [[2, 5, 3], []]
    feeds = random_feeds(out)
    before = make_model([helper.make_node("Mul", ["X", "S"], ["O"])],
                        [("X", F32, [2, 5, 3]), ("S", F32, [])], [("O", F32, None)])
    assert_same_outputs(before, out, feeds)


def test_conflict_with_an_explicit_input_shape_is_an_error():
    model = make_model([helper.make_node("Relu", ["X"], ["O"])], [("X", F32, ["N", 2])], [("O", F32, None)])
    with pytest.raises(ConversionError, match="dim 0 = 2 but --batch_size is 4"):
        run_pass(model, ["input_shape_override", "const_batch_size"], input_shape={"X": [2, 2]}, batch_size=4)


def test_input_without_shape_is_an_error_naming_it():
    model = make_model([helper.make_node("Relu", ["X"], ["O"])], [("X", F32, None)], [("O", F32, None)])
    with pytest.raises(ConversionError, match="input 'X' has no shape"):
        run_pass(model, "const_batch_size", batch_size=2)


def test_without_batch_size_nothing_changes():
    model = make_model([helper.make_node("Relu", ["X"], ["O"])], [("X", F32, ["N", 2])], [("O", F32, None)])
    assert run_pass(model, "const_batch_size") == model
