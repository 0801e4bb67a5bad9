"""Lowering rules of the wider operator set: the attributes they hand to the kernels (docs/popef.md §3) are
explicit and normalized, and unsupported cases fail naming the node."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler.errors import LoweringError
from compiler.lowering_rules.resize import axis_taps
from compiler.onnx_graph.spatial_window import same_pads
from compiler.lowering.weights import WeightStore
from compiler_test_helpers import F16, F32, I64, fuse_and_lower, make_model


def _step(node, inputs, inits=None, opset=17, outputs=None):
    outputs = outputs or [(o, inputs[0][1], None) for o in node.output if o]
    graph = fuse_and_lower(make_model([node], inputs, outputs, inits, opset=opset), WeightStore(), "test.onnx")
    (step,) = graph.steps
    return step.op, step.inputs, step.attrs


@pytest.mark.parametrize("upper, expected", [(True, [0, 1, 1, 1]), (False, [1, 1, 0, 1])])
def test_same_pads_put_the_odd_pixel_at_the_end_for_upper(upper, expected):
    # in 6 stride 2 kernel 2 -> out 3, total 0; in 7 stride 1 kernel 3 -> total 2
    assert same_pads([6, 7], [3, 3], [2, 1], [1, 1], upper) == expected


def test_conv_attrs_are_explicit_and_auto_pad_is_resolved():
    node = helper.make_node("Conv", ["X", "W", "B"], ["Y"], auto_pad="SAME_UPPER", strides=[2, 2])
    op, inputs, attrs = _step(node, [("X", F32, [1, 3, 7, 8])],
                              {"W": np.ones((4, 3, 3, 3), np.float32), "B": np.zeros(4, np.float32)})
    assert (op, inputs) == ("Conv", ["X", "W", "B"])
    assert attrs == {"strides": [2, 2], "dilations": [1, 1], "pads": [1, 0, 1, 1], "group": 1}


def test_conv_kernel_shape_must_match_the_weights():
    node = helper.make_node("Conv", ["X", "W"], ["Y"], kernel_shape=[2, 2], name="c")
    with pytest.raises(LoweringError, match="node 'c' \\(Conv\\): kernel_shape \\[2, 2\\] differs"):
        _step(node, [("X", F32, [1, 1, 5, 5])], {"W": np.ones((1, 1, 3, 3), np.float32)},
              outputs=[("Y", F32, [1, 1, 4, 4])])


@pytest.mark.parametrize("attrs, pads, output_padding", [
    (dict(strides=[2, 2], output_shape=[10, 10]), [1, 0, 0, 0], [0, 1]),  # totals 1 and -1 (output_padding grows)
    (dict(strides=[2, 2], auto_pad="SAME_UPPER"), [0, 0, 1, 1], [0, 0]),  # out = in * stride
    (dict(pads=[1, 0, 1, 2], output_padding=[1, 0], strides=[2, 1]), [1, 0, 1, 2], [1, 0]),
])
def test_conv_transpose_pads_from_output_shape_and_auto_pad(attrs, pads, output_padding):
    node = helper.make_node("ConvTranspose", ["X", "W"], ["Y"], **attrs)
    # full output: stride·(in−1) + kernel = [11, 9]
    _, _, got = _step(node, [("X", F32, [1, 2, 5, 4])], {"W": np.ones((2, 3, 3, 3), np.float32)})
    assert got["pads"] == pads and got["output_padding"] == output_padding


def test_pool_attrs_and_unsupported_dtype():
    node = helper.make_node("AveragePool", ["X"], ["Y"], kernel_shape=[3], count_include_pad=1, pads=[1, 1])
    assert _step(node, [("X", F16, [1, 2, 9])])[2] == {"kernel_shape": [3], "strides": [1], "dilations": [1],
                                                       "pads": [1, 1], "count_include_pad": 1}
    node = helper.make_node("AveragePool", ["X"], ["Y"], kernel_shape=[3], name="ap")
    with pytest.raises(LoweringError, match="node 'ap' \\(AveragePool\\): input 'X' has dtype int64"):
        _step(node, [("X", I64, [1, 2, 9])])


def test_batch_normalization_training_mode_is_refused():
    node = helper.make_node("BatchNormalization", ["X", "s", "b", "m", "v"], ["Y", "rm", "rv"], training_mode=1,
                            name="bn")
    c = {k: np.ones(2, np.float32) for k in "sbmv"}
    with pytest.raises(LoweringError, match="node 'bn' \\(BatchNormalization\\): training mode"):
        _step(node, [("X", F32, [1, 2, 3])], c)


def test_layer_normalization_flags_say_which_optional_outputs_exist():
    node = helper.make_node("LayerNormalization", ["X", "S"], ["Y", "", "inv"], axis=-2)
    op, _, attrs = _step(node, [("X", F32, [2, 3, 4])], {"S": np.ones((3, 4), np.float32)})
    assert attrs == {"axis": 1, "epsilon": 1e-5, "mean_output": 0, "inv_std_dev_output": 1}


def test_slice_becomes_clamped_starts_and_steps_per_axis():
    node = helper.make_node("Slice", ["X", "s", "e", "a", "st"], ["Y"])
    inits = {"s": np.array([-1, 100], np.int64), "e": np.array([-100, 0], np.int64),
             "a": np.array([2, 0], np.int64), "st": np.array([-2, -1], np.int64)}
    assert _step(node, [("X", F32, [3, 4, 5])], inits)[2] == {"starts": [2, 0, 4], "steps": [-1, 1, -2]}


def test_pad_axes_input_becomes_a_full_begin_end_list():
    node = helper.make_node("Pad", ["X", "p", "v", "a"], ["Y"], mode="reflect")
    inits = {"p": np.array([1, -1, 2, 0], np.int64), "v": np.array(0.0, np.float32), "a": np.array([-1, 0], np.int64)}
    assert _step(node, [("X", F32, [3, 4])], inits, opset=18)[2] == {"mode": "reflect", "pads": [-1, 1, 0, 2],
                                                                     "value": 0.0}


@pytest.mark.parametrize("op, opset, axes_as, keepdims, noop, expected", [
    ("ReduceSum", 13, "input", 1, 0, [0, 2]),
    ("ReduceMean", 13, "attr", 0, 0, [0, 2]),
    ("ReduceMean", 18, "input", 0, 0, [0, 2]),
    ("ReduceMax", 18, None, 1, 0, [0, 1, 2]),     # no axes: all of them
    ("ReduceL2", 18, None, 1, 1, []),             # noop_with_empty_axes: none
])
def test_reduce_axes_attribute_or_input_normalized(op, opset, axes_as, keepdims, noop, expected):
    inputs, inits, attrs = ["X"], {}, dict(keepdims=keepdims, noop_with_empty_axes=noop)
    if axes_as == "input":
        inputs.append("axes")
        inits["axes"] = np.array([2, -3], np.int64)
    elif axes_as == "attr":
        attrs["axes"] = [2, -3]
    if op == "ReduceSum" or opset >= 18:
        attrs.pop("noop_with_empty_axes") if not noop else None
    else:
        attrs.pop("noop_with_empty_axes")
    node = helper.make_node(op, inputs, ["Y"], **attrs)
    assert _step(node, [("X", F32, [2, 3, 4])], inits, opset=opset)[2] == {"axes": expected}


def test_clip_bounds_become_attributes_and_infinite_ones_are_dropped():
    node = helper.make_node("Clip", ["X", "lo", "hi"], ["Y"])
    inits = {"lo": np.array(-np.inf, np.float32), "hi": np.array(6, np.float32)}
    assert _step(node, [("X", F32, [4])], inits)[2] == {"max": 6.0}
    node = helper.make_node("Clip", ["X", "", "hi"], ["Y"])
    assert _step(node, [("X", I64, [4])], {"hi": np.array(3, np.int64)})[2] == {"max": 3}


def test_clip_bound_computed_at_run_time_is_refused():
    node = helper.make_node("Clip", ["X", "lo"], ["Y"], name="clip")
    with pytest.raises(LoweringError, match="input 'lo' must be a constant"):
        _step(node, [("X", F32, [4]), ("lo", F32, [])])


def test_shape_of_a_runtime_value_cannot_be_lowered():
    node = helper.make_node("Range", ["a", "b", "c"], ["Y"], name="r")
    with pytest.raises(LoweringError, match="node 'r' \\(Range\\): Range is evaluated at compile time, but its "
                                            "input\\(s\\) a, b, c are only known at run time"):
        _step(node, [("a", F32, []), ("b", F32, []), ("c", F32, [])], outputs=[("Y", F32, [3])])


def test_resize_nearest_tf2onnx_upsampling_is_an_index_table_of_the_changing_axes():
    node = helper.make_node("Resize", ["X", "", "scales"], ["Y"], mode="nearest",
                            coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    attrs = _step(node, [("X", F32, [1, 2, 3, 2])], {"scales": np.array([1, 1, 2, 1], np.float32)})[2]
    assert attrs == {"mode": "nearest", "axes": [2], "taps": [1], "indices": [0, 0, 1, 1, 2, 2]}


def test_resize_linear_half_pixel_taps_and_weights():
    taps, indices, weights = axis_taps("linear", "half_pixel", "round_prefer_floor", -0.75, False, 2.0, 2, 4)
    assert taps == 2
    assert indices == [0, 0, 0, 1, 0, 1, 1, 1]  # coordinates -0.25, 0.25, 0.75, 1.25 clamped at the edges
    np.testing.assert_allclose(weights, [0.25, 0.75, 0.75, 0.25, 0.25, 0.75, 0.75, 0.25])


@pytest.mark.parametrize("attrs, message", [
    (dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize"),
     "coordinate_transformation_mode 'tf_crop_and_resize' is not supported"),
    (dict(mode="linear", antialias=1), "antialias=1 is not supported"),
])
def test_resize_unsupported_modes_fail_clearly(attrs, message):
    node = helper.make_node("Resize", ["X", "", "scales"], ["Y"], name="rs", **attrs)
    with pytest.raises(LoweringError, match="node 'rs' \\(Resize\\): " + message):
        _step(node, [("X", F32, [1, 1, 4, 4])], {"scales": np.array([1, 1, 0.5, 0.5], np.float32)}, opset=18)


def test_comparison_and_where_dtypes():
    node = helper.make_node("Less", ["A", "B"], ["Y"])
    assert _step(node, [("A", I64, [3]), ("B", I64, [1])], outputs=[("Y", TensorProto.BOOL, [3])])[0] == "Less"
    node = helper.make_node("Where", ["C", "A", "B"], ["Y"], name="w")
    with pytest.raises(LoweringError, match="node 'w' \\(Where\\): input 'C' has dtype float32"):
        _step(node, [("C", F32, [3]), ("A", F32, [3]), ("B", F32, [3])], outputs=[("Y", F32, [3])])
