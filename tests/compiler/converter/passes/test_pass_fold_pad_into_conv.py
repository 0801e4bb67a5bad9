"""fold_pad_into_conv: a zero Pad of the spatial axes in front of a Conv (any group) or an
AveragePool that counts its padding disappears into that op's pads (Keras' ZeroPadding2D in
front of MobileNetV2's stride-2 blocks). The graph after the pass is checked against
onnxruntime running the original model, then the original is converted with the default
pipeline, compiled and run on the emulator in fp32 and fp16; negative cases check the Pads
that must stay (MaxPool, non-zero fill, other modes, batch/channel padding...)."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler import Compiler
from compiler.converter import Converter
from compiler_test_helpers import F32, make_model, op_types, ort_run, random_feeds, run_pass
from tf_popef_op.runtime import ModelRunner, RuntimeConfig

RNG = np.random.default_rng(0)
N, C, M, H = 2, 4, 8, 9
KERAS_PADS = [0, 0, 0, 0, 0, 0, 1, 1]  # ZeroPadding2D(((0, 1), (0, 1))) on NCHW


def _out(size, pad_total, k=3, stride=1):
    return (size + pad_total - k) // stride + 1


def pad_then(window="Conv", pads=KERAS_PADS, opset=13, value=None, mode=None, axes=None, window_attrs=None,
             group=1, x_shape=(N, C, H, H), out_shape=None):
    """X -> Pad -> window op -> Y. pads: as written in the Pad (attribute before opset 11)."""
    inits, pad_attrs = {}, {}
    if mode is not None:
        pad_attrs["mode"] = mode
    if opset < 11:
        pad_attrs["pads"] = pads
        if value is not None:
            pad_attrs["value"] = value
        pad_inputs = ["X"]
    else:
        inits["pads"] = np.array(pads, np.int64)
        pad_inputs = ["X", "pads"]
        if value is not None:
            inits["value"] = np.array(value, np.float32)
            pad_inputs.append("value")
        if axes is not None:
            pad_inputs += [""] * (3 - len(pad_inputs)) + ["axes"]
            inits["axes"] = np.array(axes, np.int64)
    spatial = len(x_shape) - 2
    attrs = dict(window_attrs or {})
    if window == "Conv":
        inits["W"] = RNG.standard_normal((M, C // group, *[3] * spatial)).astype(np.float32)
        inits["B"] = RNG.standard_normal(M).astype(np.float32)
        node = helper.make_node("Conv", ["P", "W", "B"], ["Y"], group=group, name="conv", **attrs)
    else:
        node = helper.make_node(window, ["P"], ["Y"], kernel_shape=[3] * spatial, name="pool", **attrs)
    nodes = [helper.make_node("Pad", pad_inputs, ["P"], name="pad", **pad_attrs), node]
    return make_model(nodes, [("X", F32, list(x_shape))], [("Y", F32, out_shape)], inits, opset=opset)


def _conv_pads(model):
    conv = next(n for n in model.graph.node if n.op_type in ("Conv", "AveragePool"))
    return next((list(a.ints) for a in conv.attribute if a.name == "pads"), None)


def _check(model, expected_ops, expected_pads):
    feeds = random_feeds(model)
    want = ort_run(model, feeds)[0]
    folded = run_pass(model, ["fold_pad_into_conv", "eliminate_unused_initializers"])
    assert op_types(folded) == expected_ops
    assert _conv_pads(folded) == expected_pads
    np.testing.assert_allclose(ort_run(folded, feeds)[0], want, rtol=1e-5, atol=1e-5)
    again = run_pass(folded, "fold_pad_into_conv")  # idempotent: a second run changes nothing
    assert again.graph == folded.graph
    for precision, tol in (("fp32", 1e-4), ("fp16", 2e-2)):
        converted = Converter(precision=precision).convert(model)
        assert op_types(converted) == expected_ops
        f = {k: v.astype(np.float16) if precision == "fp16" else v for k, v in feeds.items()}
        got = ModelRunner(Compiler.compile(converted), RuntimeConfig()).execute(f)["Y"].astype(np.float32)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max())))


# --- folds ------------------------------------------------------------------------------------
@pytest.mark.parametrize("group", [1, 2, C])  # C: depthwise
def test_keras_zero_padding_before_stride_2_conv(group):
    o = _out(H, 1, stride=2)
    model = pad_then(group=group, window_attrs={"strides": [2, 2]}, out_shape=[N, M, o, o])
    _check(model, ["Conv"], [0, 0, 1, 1])


def test_pads_add_to_the_convs_own_pads():
    pads = [0, 0, 1, 2, 0, 0, 0, 1]
    model = pad_then(pads=pads, window_attrs={"pads": [1, 1, 1, 1]},
                     out_shape=[N, M, _out(H, 3), _out(H, 4)])
    _check(model, ["Conv"], [2, 3, 1, 2])


@pytest.mark.parametrize("opset", [10, 11, 18])
def test_every_pad_form(opset):
    model = pad_then(opset=opset, out_shape=[N, M, _out(H, 1), _out(H, 1)])
    _check(model, ["Conv"], [0, 0, 1, 1])


@pytest.mark.parametrize("axes, pads", [([2, 3], [1, 0, 0, 2]), ([-1, -2], [0, 1, 2, 0])])
def test_pad_with_axes_and_explicit_zero_value(axes, pads):
    # Both write H: 1 before, W: 2 after (the second with the axes reversed and negative).
    model = pad_then(opset=18, pads=pads, axes=axes, value=0.0, out_shape=[N, M, _out(H, 1), _out(H, 2)])
    _check(model, ["Conv"], [1, 0, 0, 2])


def test_valid_auto_pad_becomes_explicit_pads():
    model = pad_then(window_attrs={"auto_pad": "VALID"}, out_shape=[N, M, _out(H, 1), _out(H, 1)])
    _check(model, ["Conv"], [0, 0, 1, 1])


def test_conv_1d():
    model = pad_then(pads=[0, 0, 2, 0, 0, 1], x_shape=(N, C, H), out_shape=[N, M, _out(H, 3)])
    _check(model, ["Conv"], [2, 1])


def test_average_pool_counting_its_padding():
    model = pad_then(window="AveragePool", window_attrs={"count_include_pad": 1, "strides": [2, 2]},
                     out_shape=[N, C, _out(H, 1, stride=2), _out(H, 1, stride=2)])
    _check(model, ["AveragePool"], [0, 0, 1, 1])


# --- left alone ---------------------------------------------------------------------------------
def _unchanged(model):
    folded = run_pass(model, "fold_pad_into_conv")
    assert op_types(folded) == op_types(model)
    assert folded.graph == model.graph


def test_max_pool_stays():
    # MaxPool pads with -inf: a zero Pad changes its result where the input is negative.
    _unchanged(pad_then(window="MaxPool", out_shape=[N, C, _out(H, 1), _out(H, 1)]))


@pytest.mark.parametrize("attrs", [{}, {"count_include_pad": 0}, {"count_include_pad": 1, "ceil_mode": 1}])
def test_average_pool_not_counting_padding_or_in_ceil_mode_stays(attrs):
    _unchanged(pad_then(window="AveragePool", window_attrs=attrs, out_shape=[N, C, _out(H, 1), _out(H, 1)]))


@pytest.mark.parametrize("opset", [10, 13])
def test_non_zero_fill_or_other_mode_stays(opset):
    _unchanged(pad_then(opset=opset, value=1.0, out_shape=[N, M, _out(H, 1), _out(H, 1)]))
    _unchanged(pad_then(opset=opset, mode="reflect", out_shape=[N, M, _out(H, 1), _out(H, 1)]))
    _unchanged(pad_then(opset=opset, mode="edge", out_shape=[N, M, _out(H, 1), _out(H, 1)]))


@pytest.mark.parametrize("pads", [[0, 1, 0, 0, 0, 0, 1, 1], [1, 0, 0, 0, 0, 0, 1, 1], [0, 0, 1, 1, 0, 0, -1, 0]])
def test_batch_channel_or_negative_pads_stay(pads):
    _unchanged(pad_then(pads=pads, out_shape=None))


def test_same_auto_pad_conv_stays():
    _unchanged(pad_then(window_attrs={"auto_pad": "SAME_UPPER"}, out_shape=None))


def test_pad_with_other_readers_or_run_time_pads_stays():
    model = pad_then(out_shape=None)
    model.graph.output.append(helper.make_tensor_value_info("P", F32, None))
    _unchanged(model)
    model = pad_then(out_shape=None)
    model.graph.node.append(helper.make_node("Relu", ["P"], ["R"]))
    model.graph.output.append(helper.make_tensor_value_info("R", F32, None))
    _unchanged(model)
    model = pad_then(out_shape=None)
    del model.graph.initializer[[t.name for t in model.graph.initializer].index("pads")]
    model.graph.input.append(helper.make_tensor_value_info("pads", TensorProto.INT64, [8]))
    _unchanged(model)
