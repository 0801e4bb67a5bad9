"""Depthwise convolutions in the blocked layout (NchwcConv's depthwise tiles,
kernels/nchwc/nchwc_depthwise_tiles.inc) against onnxruntime: an inverted-residual block (1x1
expand + Relu6, depthwise + bias + activation, 1x1 project) with 3x3, 5x5 and 7x7 windows at
stride 1 and 2, Keras' symmetric and folded-ZeroPadding2D pads, planes of 7, 14 and odd widths,
batch 1 and 2; the depthwise activation is Relu6 (applied in registers), swish (x·sigmoid(x),
EfficientNet's; applied to each finished row) or none. float32 within 1e-4 of onnxruntime;
float16 (Converter precision fp16: activations stay float16 through the tiles) within the
float16 tolerance, on the default SIMD path and in a process forced to the portable one. The
blocks are compiled as three steps (CompilerOptions.inverted_residual="off"); the fused block's
test is test_inverted_residual.py."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from e2e_helpers import (assert_matches_fp32_reference, check_every_case_in_new_process, conv_attributes_and_output,
                         run_onnxruntime, run_with_profile)

from compiler.options import CompilerOptions

F = TensorProto.FLOAT

# name: (x shape [N, C, H, W], window, stride, pads [top, left, bottom, right], activation)
CASES = {
    "k3_s1_14": ((1, 16, 14, 14), 3, 1, [1, 1, 1, 1], "relu6"),
    "k3_s2_folded_pad_28": ((2, 16, 28, 28), 3, 2, [0, 0, 1, 1], "swish"),
    "k5_s1_14": ((1, 16, 14, 14), 5, 1, [2, 2, 2, 2], "swish"),
    "k5_s1_7": ((2, 24, 7, 7), 5, 1, [2, 2, 2, 2], "swish"),
    "k5_s2_folded_pad_odd": ((1, 16, 15, 17), 5, 2, [1, 1, 2, 2], "relu6"),
    "k7_s1_7": ((2, 16, 7, 7), 7, 1, [3, 3, 3, 3], "none"),
    "k7_s1_odd": ((1, 16, 19, 23), 7, 1, [3, 3, 3, 3], "none"),
    "k7_s2": ((1, 16, 20, 20), 7, 2, [3, 3, 3, 3], "relu6"),
    # EfficientNetB0's block1a depthwise (its 112x112 rows and swish, 16 of its 32 channels), and batch 8
    "k3_s1_112_block1a": ((1, 16, 112, 112), 3, 1, [1, 1, 1, 1], "swish"),
    "k3_s1_56_b8": ((8, 8, 56, 56), 3, 1, [1, 1, 1, 1], "swish"),
}


def inverted_residual(x_shape, k, stride, pads, activation, seed=0):
    rng = np.random.default_rng(seed)
    n, c, h, w = x_shape
    e = 2 * c
    inits = [
        numpy_helper.from_array((rng.standard_normal((e, c, 1, 1)) * 0.3).astype(np.float32), "We"),
        numpy_helper.from_array((rng.standard_normal(e) * 0.1).astype(np.float32), "Be"),
        numpy_helper.from_array((rng.standard_normal((e, 1, k, k)) * 0.3).astype(np.float32), "Wd"),
        numpy_helper.from_array((rng.standard_normal(e) * 0.1).astype(np.float32), "Bd"),
        numpy_helper.from_array((rng.standard_normal((c, e, 1, 1)) * 0.3).astype(np.float32), "Wp"),
        numpy_helper.from_array(np.array(0, np.float32), "lo"),
        numpy_helper.from_array(np.array(6, np.float32), "hi"),
    ]
    attrs, dw_out = conv_attributes_and_output((n, e, h, w), (k, k), e, dict(strides=[stride, stride], pads=pads))
    nodes = [
        helper.make_node("Conv", ["X", "We", "Be"], ["ec"]),
        helper.make_node("Clip", ["ec", "lo", "hi"], ["er"]),
        helper.make_node("Conv", ["er", "Wd", "Bd"], ["dc"], kernel_shape=[k, k], group=e, **attrs),
    ]
    if activation == "relu6":
        nodes.append(helper.make_node("Clip", ["dc", "lo", "hi"], ["da"]))
    elif activation == "swish":
        nodes += [helper.make_node("Sigmoid", ["dc"], ["ds"]), helper.make_node("Mul", ["dc", "ds"], ["da"])]
    else:
        nodes.append(helper.make_node("Identity", ["dc"], ["da"]))
    nodes.append(helper.make_node("Conv", ["da", "Wp"], ["Y"]))
    out = [n, c, dw_out[2], dw_out[3]]
    graph = helper.make_graph(nodes, "inverted_residual", [helper.make_tensor_value_info("X", F, list(x_shape))],
                              [helper.make_tensor_value_info("Y", F, out)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def check_case(name, precision):
    x_shape, k, stride, pads, activation = CASES[name]
    model = inverted_residual(x_shape, k, stride, pads, activation)
    x = np.random.default_rng(1).standard_normal(x_shape).astype(np.float32)
    want = run_onnxruntime(model, {"X": x})["Y"]
    got, ops = run_with_profile(model, x, precision, CompilerOptions(inverted_residual="off"))
    # Every convolution ran blocked (the depthwise one included): no NCHW convolution kernel.
    assert "NchwcConv" in ops and not set(ops) & {"Conv", "FusedConv"}, f"{name}: {sorted(ops)}"
    assert_matches_fp32_reference(got, want, precision, name)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", list(CASES))
def test_blocked_depthwise_vs_onnxruntime(name, precision):
    check_case(name, precision)


def test_blocked_depthwise_vs_onnxruntime_on_the_portable_path():
    """Every case again in a process on the portable SIMD path (its own build of the tiles)."""
    check_every_case_in_new_process("test_nchwc_depthwise", len(CASES), TF_POPEF_SIMD="portable")
