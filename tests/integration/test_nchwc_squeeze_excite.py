"""Squeeze-and-excite blocks in the blocked layout against onnxruntime, as tf2onnx writes them
from Keras: EfficientNet's MBConv (1x1 expand + swish, depthwise + swish, GlobalAveragePool ->
Squeeze -> Reshape -> 1x1 reduce conv with M % 8 != 0 + swish -> 1x1 expand conv + sigmoid,
the excitation Mul, 1x1 project) and MobileNetV3's (hard-swish convs, reduce + Relu, expand +
hard-sigmoid). Compiled with the default options, every convolution is an NchwcConv with its
activation in the tiles' registers (the expand -> depthwise pair one NchwcInvertedResidual
without a project stage at the batches to_inverted_residual.should_fuse_pair takes), and nothing is converted between layouts inside the block
(one ToNchwc of the input, one FromNchwc of the output), and the excitation Mul is folded into
the project convolution (its input scale: no pass over the scaled tensor) in float16, and in
float32 where the pass's rule folds it (where it does not, float16 scales the project's widened
input rows: float32's arithmetic there). float32 within 1e-4 of onnxruntime;
float16 (Converter precision fp16) within the float16 tolerance; also in a process on the
portable SIMD path."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.kernel_fusion.passes.fold_channel_scale_into_nchwc_conv import F32_MIN_PIXELS_PER_OUTPUT
from compiler.kernel_fusion.passes.to_inverted_residual import should_fuse_pair
from e2e_helpers import assert_matches_fp32_reference, check_every_case_in_new_process, run_onnxruntime, run_with_profile

F = TensorProto.FLOAT

# name: (x shape [N, C, H, W], expanded channels, squeezed channels, window, stride, family)
CASES = {
    "efficientnet_k3": ((1, 16, 14, 14), 96, 4, 3, 1, "efficientnet"),
    "efficientnet_k5_s2_b2": ((2, 24, 15, 15), 144, 6, 5, 2, "efficientnet"),
    "mobilenet_v3_k3": ((1, 16, 12, 12), 64, 20, 3, 1, "mobilenet_v3"),
    # rows cut into several segments and more than one pass over the expanded channels
    "efficientnet_k3_wide_b3": ((3, 24, 30, 30), 600, 8, 3, 1, "efficientnet"),
    # fewer pixels than project outputs: float32 keeps the Mul (split over the threads by image)
    "efficientnet_k5_7x7_b2": ((2, 80, 7, 7), 480, 20, 5, 1, "efficientnet"),
}


def squeeze_excite_block(x_shape, expanded, squeezed, k, stride, family, seed=0):
    rng = np.random.default_rng(seed)
    n, c, h, w = x_shape
    inits = {}
    nodes = []

    def conv(x, m, cin, out, k=1, group=1, **attrs):
        inits[f"{out}_W"] = (rng.standard_normal((m, cin // group, k, k)) / np.sqrt(cin // group * k * k)
                             ).astype(np.float32)
        inits[f"{out}_B"] = (rng.standard_normal(m) * 0.1).astype(np.float32)
        nodes.append(helper.make_node("Conv", [x, f"{out}_W", f"{out}_B"], [out], group=group,
                                      kernel_shape=[k, k], **attrs))
        return out

    def act(x, kind, out):
        if kind == "swish":
            nodes.append(helper.make_node("Sigmoid", [x], [out + "_sig"]))
            nodes.append(helper.make_node("Mul", [x, out + "_sig"], [out]))
        elif kind == "hard_sigmoid":
            nodes.append(helper.make_node("HardSigmoid", [x], [out], alpha=1.0 / 6, beta=0.5))
        else:  # Sigmoid, HardSwish, Relu
            nodes.append(helper.make_node(kind, [x], [out]))
        return out

    main_act = "swish" if family == "efficientnet" else "HardSwish"
    e = act(conv("X", expanded, c, "expand"), main_act, "expand_act")
    pad = k // 2
    d = act(conv(e, expanded, expanded, "dw", k=k, group=expanded, strides=[stride, stride], pads=[pad] * 4),
            main_act, "dw_act")
    nodes.append(helper.make_node("GlobalAveragePool", [d], ["pooled"]))
    inits["axes"] = np.array([2, 3], np.int64)
    inits["shape"] = np.array([-1, expanded, 1, 1], np.int64)
    nodes.append(helper.make_node("Squeeze", ["pooled", "axes"], ["pooled_flat"]))
    nodes.append(helper.make_node("Reshape", ["pooled_flat", "shape"], ["pooled_again"]))
    r = act(conv("pooled_again", squeezed, expanded, "reduce"), "swish" if family == "efficientnet" else "Relu",
            "reduce_act")
    g = act(conv(r, expanded, squeezed, "excite"), "Sigmoid" if family == "efficientnet" else "hard_sigmoid",
            "gate")
    nodes.append(helper.make_node("Mul", [d, g], ["scaled"]))
    conv("scaled", c, expanded, "Y")
    oh = (h + 2 * pad - k) // stride + 1
    ow = (w + 2 * pad - k) // stride + 1
    graph = helper.make_graph(nodes, "squeeze_excite", [helper.make_tensor_value_info("X", F, list(x_shape))],
                              [helper.make_tensor_value_info("Y", F, [n, c, oh, ow])],
                              [numpy_helper.from_array(v, name) for name, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def check_case(name, precision):
    model = squeeze_excite_block(*CASES[name])
    x = np.random.default_rng(1).standard_normal(CASES[name][0]).astype(np.float32)
    want = run_onnxruntime(model, {"X": x})["Y"]
    got, ops = run_with_profile(model, x, precision)
    # the expand -> depthwise pair is one NchwcInvertedResidual where policy auto fuses pairs
    pair = should_fuse_pair(CASES[name][0][0])
    assert ops.count("NchwcInvertedResidual") == int(pair), f"{name}: {ops}"
    assert ops.count("NchwcConv") == (3 if pair else 5), f"{name}: {ops}"
    assert ops.count("ToNchwc") == ops.count("FromNchwc") == 1, f"{name}: {ops}"
    assert not set(ops) & {"Conv", "FusedConv", "Reshape", "Squeeze"}, f"{name}: {ops}"
    (n, c, h, w), k, stride = CASES[name][0], CASES[name][3], CASES[name][4]
    pixels = ((h + k // 2 * 2 - k) // stride + 1) * ((w + k // 2 * 2 - k) // stride + 1)
    folded = precision == "fp16" or pixels >= F32_MIN_PIXELS_PER_OUTPUT * c
    assert ops.count("Mul") == (0 if folded else 1), f"{name}: {ops}"
    assert_matches_fp32_reference(got, want, precision, name)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", list(CASES))
def test_squeeze_excite_block_vs_onnxruntime(name, precision):
    check_case(name, precision)


def test_squeeze_excite_blocks_vs_onnxruntime_on_the_portable_path():
    check_every_case_in_new_process("test_nchwc_squeeze_excite", len(CASES), TF_POPEF_SIMD="portable")
