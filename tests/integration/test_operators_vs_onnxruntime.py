"""The Keras-model operators end to end (compiler -> PopEF -> emulator) against onnxruntime, on random
data of realistic sizes, in fp32 and fp16 (--precision fp16: the whole model in float16,
compared with the fp32 oracle). The ONNX conformance suite (tests/conformance) covers the
attribute corners on tiny tensors; these cases cover each kernel path (pointwise, depthwise
and im2col convolution, ceil_mode pools, separable resize...) at the sizes Keras models use."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from e2e_helpers import compile_and_run, run_onnxruntime

F = TensorProto.FLOAT
TOL = {"fp32": dict(rtol=1e-4, atol=1e-5), "fp16": dict(rtol=2e-2, atol=2e-2)}


def one_node(op, x_shape, y_shape, weights=None, extra_inputs=(), opset=17, **attrs):
    """Model X -> op(X, *weights) -> Y; `weights` are initializers given in input order."""
    weights = weights or {}
    node = helper.make_node(op, ["X", *weights, *extra_inputs], ["Y"], name=f"{op.lower()}0", **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", F, x_shape)],
                              [helper.make_tensor_value_info("Y", F, y_shape)],
                              [numpy_helper.from_array(v, k) for k, v in weights.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def check(model, rng, x_shape, precision, scale=1.0):
    x = {"X": (rng.standard_normal(x_shape) * scale).astype(np.float32)}
    want = run_onnxruntime(model, x)
    got = compile_and_run(model, x, precision)
    for name in want:
        np.testing.assert_allclose(np.asarray(got[name], np.float32), want[name], err_msg=name, **TOL[precision])


def _w(rng, *shape, scale=0.2):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


CONVS = {  # name: (x shape, W shape, attrs) - covers each kernel path
    "pointwise": ((2, 16, 14, 14), (24, 16, 1, 1), {}),
    "im2col_same_upper_stride2": ((2, 8, 15, 15), (16, 8, 3, 3), dict(strides=[2, 2], auto_pad="SAME_UPPER")),
    "im2col_same_lower": ((1, 4, 12, 12), (6, 4, 4, 4), dict(strides=[3, 3], auto_pad="SAME_LOWER")),
    "im2col_dilated": ((1, 4, 12, 12), (6, 4, 3, 3), dict(dilations=[2, 3], pads=[2, 3, 2, 3])),
    "im2col_valid_5x5_pads": ((1, 3, 20, 17), (8, 3, 5, 5), dict(pads=[1, 2, 0, 3])),
    "grouped": ((2, 8, 10, 10), (12, 4, 3, 3), dict(group=2, pads=[1, 1, 1, 1])),
    "depthwise_stride1": ((2, 32, 16, 16), (32, 1, 3, 3), dict(group=32, pads=[1, 1, 1, 1])),
    "depthwise_stride2_same": ((1, 16, 15, 15), (16, 1, 3, 3), dict(group=16, strides=[2, 2], auto_pad="SAME_UPPER")),
    "depthwise_multiplier2": ((1, 8, 9, 9), (16, 1, 3, 3), dict(group=8)),
    "conv1d_causal_pads": ((2, 6, 30), (10, 6, 3), dict(pads=[2, 0], dilations=[1])),
    "conv1d_stride2": ((1, 4, 31), (5, 4, 5), dict(strides=[2], auto_pad="SAME_UPPER")),
}


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", sorted(CONVS))
def test_conv(rng, name, precision):
    x_shape, w_shape, attrs = CONVS[name]
    weights = {"W": _w(rng, *w_shape), "B": _w(rng, w_shape[0])}
    check(one_node("Conv", x_shape, None, weights, **attrs), rng, x_shape, precision)


CONV_TRANSPOSES = {
    "stride2_same": ((1, 8, 7, 7), (8, 4, 3, 3), dict(strides=[2, 2], auto_pad="SAME_UPPER")),
    "stride2_pads_output_padding": ((2, 4, 5, 6), (4, 3, 3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1],
                                                                      output_padding=[1, 1])),
    "grouped_dilated": ((1, 6, 5, 5), (6, 2, 3, 3), dict(group=3, dilations=[2, 2])),
    "output_shape": ((1, 3, 4, 4), (3, 2, 4, 4), dict(strides=[2, 2], output_shape=[9, 9])),
    "conv1d": ((2, 4, 9), (4, 5, 3), dict(strides=[3])),
}


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", sorted(CONV_TRANSPOSES))
def test_conv_transpose(rng, name, precision):
    x_shape, w_shape, attrs = CONV_TRANSPOSES[name]
    weights = {"W": _w(rng, *w_shape), "B": _w(rng, w_shape[1] * attrs.get("group", 1))}
    check(one_node("ConvTranspose", x_shape, None, weights, **attrs), rng, x_shape, precision)


POOLS = {
    "max_3x3_s2_ceil": ("MaxPool", (2, 8, 15, 15), dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    "max_same_upper": ("MaxPool", (1, 4, 10, 11), dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")),
    "max_dilated_pads": ("MaxPool", (1, 3, 12, 12), dict(kernel_shape=[2, 2], dilations=[2, 2], pads=[1, 1, 1, 1])),
    "max_1d": ("MaxPool", (2, 5, 20), dict(kernel_shape=[4], strides=[3])),
    "avg_exclude_pad": ("AveragePool", (2, 8, 14, 14), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    "avg_include_pad_ceil": ("AveragePool", (1, 4, 11, 11), dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                                                               count_include_pad=1, ceil_mode=1)),
    "avg_same_lower": ("AveragePool", (1, 6, 9, 9), dict(kernel_shape=[2, 2], strides=[2, 2], auto_pad="SAME_LOWER")),
    "global_avg": ("GlobalAveragePool", (2, 16, 7, 7), {}),
    "global_max": ("GlobalMaxPool", (2, 16, 7, 5), {}),
}


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", sorted(POOLS))
def test_pool(rng, name, precision):
    op, x_shape, attrs = POOLS[name]
    check(one_node(op, x_shape, None, **attrs), rng, x_shape, precision)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_batch_normalization(rng, precision):
    c = 12
    weights = {"scale": _w(rng, c, scale=1.0), "B": _w(rng, c), "mean": _w(rng, c),
               "var": np.abs(_w(rng, c, scale=1.0)) + 0.1}
    check(one_node("BatchNormalization", (2, c, 9, 9), None, weights, epsilon=1e-3), rng, (2, c, 9, 9), precision)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("axis, param_shape", [(-1, (64,)), (-2, (8, 64)), (1, (8, 64))])
def test_layer_normalization(rng, precision, axis, param_shape):
    weights = {"Scale": _w(rng, *param_shape, scale=1.0), "B": _w(rng, *param_shape)}
    check(one_node("LayerNormalization", (4, 8, 64), None, weights, axis=axis, epsilon=1e-5), rng, (4, 8, 64),
          precision, scale=3.0)



@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_layer_normalization_bert_rows(rng, precision):
    """BERT's rows of 256 (the statistics' four accumulators of 8 lanes), each row offset by a
    mean of up to ±8 against a spread of 1, as the residual stream's rows are."""
    weights = {"Scale": _w(rng, 256, scale=1.0), "B": _w(rng, 256)}
    model = one_node("LayerNormalization", (2, 64, 256), None, weights, axis=-1, epsilon=1e-12)
    x = {"X": (rng.standard_normal((2, 64, 256)) + rng.uniform(-8, 8, (2, 64, 1))).astype(np.float32)}
    want = run_onnxruntime(model, x)
    got = compile_and_run(model, x, precision)
    np.testing.assert_allclose(np.asarray(got["Y"], np.float32), want["Y"], **TOL[precision])

RESIZES = {  # what tf2onnx emits for UpSampling2D, plus the other transforms
    "nearest_asymmetric_floor": dict(mode="nearest", coordinate_transformation_mode="asymmetric",
                                     nearest_mode="floor"),
    "nearest_half_pixel": dict(mode="nearest", coordinate_transformation_mode="half_pixel"),
    "nearest_tf_half_pixel_for_nn": dict(mode="nearest", coordinate_transformation_mode="tf_half_pixel_for_nn"),
    "linear_half_pixel": dict(mode="linear", coordinate_transformation_mode="half_pixel"),
    "linear_asymmetric": dict(mode="linear", coordinate_transformation_mode="asymmetric"),
    "linear_align_corners": dict(mode="linear", coordinate_transformation_mode="align_corners"),
    "linear_pytorch_half_pixel": dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
    "cubic_half_pixel": dict(mode="cubic", coordinate_transformation_mode="half_pixel"),
    "cubic_exclude_outside": dict(mode="cubic", exclude_outside=1, cubic_coeff_a=-0.5),
}


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("scales", [(2.0, 2.0), (0.5, 1.5)])
@pytest.mark.parametrize("name", sorted(RESIZES))
def test_resize_scales(rng, name, scales, precision):
    x_shape = (2, 3, 8, 10)
    weights = {"roi": np.zeros(0, np.float32), "scales": np.array((1.0, 1.0) + scales, np.float32)}
    check(one_node("Resize", x_shape, None, weights, **RESIZES[name]), rng, x_shape, precision)


def test_resize_sizes(rng):
    x_shape = (1, 4, 7, 9)
    weights = {"roi": np.zeros(0, np.float32), "scales": np.zeros(0, np.float32),
               "sizes": np.array([1, 4, 15, 4], np.int64)}
    check(one_node("Resize", x_shape, None, weights, mode="linear"), rng, x_shape, "fp32")


PADS = {"constant": dict(mode="constant"), "reflect": dict(mode="reflect"), "edge": dict(mode="edge")}


@pytest.mark.parametrize("mode", sorted(PADS))
def test_pad(rng, mode):
    weights = {"pads": np.array([0, 0, 2, 3, 0, 0, 3, 1], np.int64), "value": np.array(1.5, np.float32)}
    if mode != "constant":
        del weights["value"]
    check(one_node("Pad", (2, 3, 6, 7), None, weights, **PADS[mode]), rng, (2, 3, 6, 7), "fp32")


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceProd"])
@pytest.mark.parametrize("axes, keepdims", [((1,), 1), ((0, 2), 0), ((-1,), 0)])
def test_reductions(rng, op, axes, keepdims, precision):
    weights = {"axes": np.array(axes, np.int64)}
    scale = 0.5 if op == "ReduceProd" else 1.0
    check(one_node(op, (3, 5, 7), None, weights, opset=18, keepdims=keepdims), rng, (3, 5, 7), precision, scale)


ELEMENTWISE = [("Erf", {}), ("Exp", {}), ("Sigmoid", {}), ("Tanh", {}), ("LeakyRelu", dict(alpha=0.3)),
               ("Elu", dict(alpha=0.7)), ("Selu", {}), ("HardSigmoid", dict(alpha=0.2, beta=0.5)), ("Softplus", {}),
               ("HardSwish", {}), ("Neg", {}), ("Abs", {}), ("Softsign", {})]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("op, attrs", ELEMENTWISE, ids=[op for op, _ in ELEMENTWISE])
def test_elementwise(rng, op, attrs, precision):
    check(one_node(op, (4, 33), None, **attrs), rng, (4, 33), precision, scale=3.0)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_opset20(rng, approximate):
    check(one_node("Gelu", (4, 33), None, opset=20, approximate=approximate), rng, (4, 33), "fp32", scale=3.0)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [-1, 1])
def test_softmax_family(rng, op, axis):
    check(one_node(op, (3, 7, 11), None, axis=axis), rng, (3, 7, 11), "fp32", scale=5.0)


def test_clip_relu6_and_slice_negative_steps(rng):
    nodes = [helper.make_node("Clip", ["X", "lo", "hi"], ["c"], name="clip"),
             helper.make_node("Slice", ["c", "starts", "ends", "axes", "steps"], ["Y"], name="slice")]
    inits = [numpy_helper.from_array(np.array(0, np.float32), "lo"), numpy_helper.from_array(np.array(6, np.float32), "hi"),
             numpy_helper.from_array(np.array([-1, 1], np.int64), "starts"),
             numpy_helper.from_array(np.array([-100, 9], np.int64), "ends"),
             numpy_helper.from_array(np.array([2, 1], np.int64), "axes"),
             numpy_helper.from_array(np.array([-2, 3], np.int64), "steps")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", F, (2, 10, 9))],
                              [helper.make_tensor_value_info("Y", F, None)], inits)
    check(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), rng, (2, 10, 9), "fp32", scale=5.0)
