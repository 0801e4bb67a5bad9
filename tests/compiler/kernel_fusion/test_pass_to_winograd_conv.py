"""to_winograd_conv: 3x3 stride-1 float32 and float16 NchwcConvs -> NchwcWinogradConv with compile-time
transformed weights. Each case runs the whole KERNEL_FUSION_PIPELINE (to_nchwc_layout writes the
NchwcConvs first) under a policy, checks which convs were rewritten, that onnx.checker and the
lowering accept the result, and evaluates it with onnx's ReferenceEvaluator plus the numpy
references of the internal ops (written from the F(m x m, 3x3) formulas, tests/compiler/
nchwc_reference_ops.py) against onnxruntime on the original model."""
import collections

import numpy as np
import onnx
import pytest
from onnx import helper

from compiler.converter.context import PassContext
from compiler.converter.pipeline import prepare_control_flow_body, run_passes
from compiler.errors import ConfigError
from compiler.kernel_fusion import KERNEL_FUSION_PIPELINE, run_kernel_fusions
from compiler.kernel_fusion.passes.to_winograd_conv import choose_tile
from compiler.lowering.lower_graph import lower_graph
from compiler.lowering.weights import WeightStore
from compiler.onnx_graph import nchwc, winograd
from compiler.options import CompilerOptions
from compiler_test_helpers import F16, F32, make_model, ort_run, random_feeds
from nchwc_reference_ops import from_blocked, run_internal, to_blocked


def conv(nodes, inits, rng, x, c, m, name, k=3, bias=True, **attrs):
    inits[f"{name}_W"] = (rng.standard_normal((m, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
    inputs = [x, f"{name}_W"]
    if bias:
        inits[f"{name}_B"] = rng.standard_normal(m).astype(np.float32)
        inputs.append(f"{name}_B")
    nodes.append(helper.make_node("Conv", inputs, [name], name=name, kernel_shape=[k, k], **attrs))
    return name


def resnet_like(n=2, c=16, h=10, w=11, dtype=F32):
    """3x3 + Relu, 3x3 + residual Add + Relu, a 3x3 without bias with one-sided pads, and the
    convs Winograd does not take: stride 2, dilation 2, 1x1, depthwise."""
    rng = np.random.default_rng(0)
    nodes, inits = [], {}
    a = conv(nodes, inits, rng, "X", c, c, "a", pads=[1, 1, 1, 1])
    nodes.append(helper.make_node("Relu", [a], ["a_relu"]))
    b = conv(nodes, inits, rng, "a_relu", c, c, "b", pads=[1, 1, 1, 1])
    nodes += [helper.make_node("Add", [b, "X"], ["sum"]), helper.make_node("Relu", ["sum"], ["b_relu"])]
    d = conv(nodes, inits, rng, "b_relu", c, 24, "one_sided", bias=False, pads=[0, 1, 1, 0])
    s2 = conv(nodes, inits, rng, d, 24, 16, "strided", strides=[2, 2], pads=[1, 1, 1, 1])
    dl = conv(nodes, inits, rng, s2, 16, 16, "dilated", dilations=[2, 2], pads=[2, 2, 2, 2])
    pw = conv(nodes, inits, rng, dl, 16, 16, "pointwise", k=1)
    inits["dw_W"] = rng.standard_normal((16, 1, 3, 3)).astype(np.float32)
    nodes.append(helper.make_node("Conv", [pw, "dw_W"], ["Y"], name="depthwise", kernel_shape=[3, 3], group=16,
                                  pads=[1, 1, 1, 1]))
    if dtype == F16:
        inits = {k: v.astype(np.float16) for k, v in inits.items()}
    oh, ow = (h - 2) // 2 + 1, (w - 2) // 2 + 1  # one_sided: h - 1, w - 1; strided halves that
    return make_model(nodes, [("X", dtype, [n, c, h, w])], [("Y", dtype, [n, 16, oh, ow])], inits, opset=13)


def fused(model, policy):
    return run_kernel_fusions(model, "test.onnx", winograd=policy)


def rewritten_names(model):
    return sorted(n.name for n in model.graph.node if n.op_type == "NchwcWinogradConv")


def check(original, rewritten):
    onnx.checker.check_model(rewritten)
    lower_graph(rewritten, WeightStore(), "test.onnx", prepare_body=prepare_control_flow_body)
    feeds = random_feeds(original)
    want, got = ort_run(original, feeds)[0], run_internal(rewritten, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))


@pytest.mark.parametrize("policy,tile", [("f2x2", 2), ("f4x4", 4)])
def test_forced_policy_rewrites_every_3x3_stride_1_conv(policy, tile):
    model = resnet_like()
    out = fused(model, policy)
    assert rewritten_names(out) == ["a", "b", "one_sided"]
    kinds = collections.Counter(n.op_type for n in out.graph.node)
    assert kinds["NchwcConv"] == 4  # strided, dilated, pointwise, depthwise
    b = next(n for n in out.graph.node if n.name == "b")
    assert {a.name: helper.get_attribute_value(a) for a in b.attribute} == {
        "pads": [1, 1, 1, 1], "activation": b"Relu"}
    assert len(b.input) == 4  # X, U, bias, the residual sum
    u = next(t for t in out.graph.initializer if t.name == b.input[1])
    assert tuple(u.dims) == ((tile + 2) ** 2, 1, 2, 8, 16)
    names = {t.name for t in out.graph.initializer}
    assert not any(name.startswith(("a_W", "b_W", "one_sided_W")) and "winograd" not in name for name in names)
    check(model, out)


def test_off_keeps_the_direct_convolution():
    assert rewritten_names(fused(resnet_like(), "off")) == []
    assert "to_winograd_conv" in KERNEL_FUSION_PIPELINE


@pytest.mark.parametrize("policy", ["f2x2", "f4x4"])
def test_float16_model_takes_winograd_with_float32_transformed_weights(policy):
    model = resnet_like(dtype=F16)
    out, direct = fused(model, policy), fused(model, "off")
    assert rewritten_names(out) == ["a", "b", "one_sided"]
    for node in out.graph.node:
        if node.op_type == "NchwcWinogradConv":
            u = next(t for t in out.graph.initializer if t.name == node.input[1])
            assert u.data_type == onnx.TensorProto.FLOAT, node.name
            bias = [t for t in out.graph.initializer if len(node.input) > 2 and t.name == node.input[2]]
            assert all(t.data_type == onnx.TensorProto.FLOAT16 for t in bias), node.name
    onnx.checker.check_model(out)
    lower_graph(out, WeightStore(), "test.onnx", prepare_body=prepare_control_flow_body)
    # Against the direct convolution's reference on the same float16 model: both round each
    # step's output to float16 once, so they differ by float16 roundings only.
    feeds = random_feeds(model)
    got, want = run_internal(out, feeds)[0], run_internal(direct, feeds)[0]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3,
                               atol=2e-3 * max(1.0, float(np.abs(want.astype(np.float32)).max())))


def test_auto_takes_the_layer_classes_measured_faster():
    # ResNet50's 3x3 layers at 224x224 (C = M): docs/benchmarks.md, "Winograd".
    resnet50 = {56: 64, 28: 128, 14: 256, 7: 512}  # plane side: channels
    assert [choose_tile(1, hw, hw, m) for hw, m in resnet50.items()] == [4, 4, 2, 2]
    assert [choose_tile(8, hw, hw, m) for hw, m in resnet50.items()] == [4, 4, 2, 2]
    # The 64x64 ResNet50 of the architecture tests.
    assert [choose_tile(8, hw, hw, m) for hw, m in zip((16, 8, 4, 2), resnet50.values())] == [2, 2, 2, None]
    assert [choose_tile(1, hw, hw, m) for hw, m in zip((16, 8, 4, 2), resnet50.values())] == [2, None, None, None]
    # Few tiles with fewer outputs (not measured) stay direct.
    assert choose_tile(1, 14, 14, 128) is None and choose_tile(1, 7, 7, 32) is None
    small = resnet_like(n=2, c=16, h=10, w=11)  # 2 images of 10x11: 36 tiles of 2x2
    assert rewritten_names(fused(small, "auto")) == []
    out = fused(resnet_like(n=2, c=16, h=16, w=17), "auto")  # 2 images of 16x17: 72 tiles of 2x2
    assert rewritten_names(out) == ["a", "b", "one_sided"]
    assert {tuple(t.dims)[0] for t in out.graph.initializer if "winograd" in t.name} == {16}
    out = fused(resnet_like(n=1, c=16, h=29, w=30), "auto")  # 28x29 and larger: F(4x4)
    assert {tuple(t.dims)[0] for t in out.graph.initializer if "winograd" in t.name} == {36}


def test_weight_transform_matches_the_direct_convolution_on_one_tile():
    rng = np.random.default_rng(3)
    for tile in winograd.TILES:
        w = rng.standard_normal((16, 8, 3, 3))
        x = rng.standard_normal((1, 8, tile + 2, tile + 2))
        u = winograd.transform_weights(nchwc.block_weights(w, nchwc.BLOCKED), tile)
        node = helper.make_node("NchwcWinogradConv", ["X", "U"], ["Y"], domain="ai.tfpopef", pads=[0, 0, 0, 0])
        model = make_model([node], [("X", onnx.TensorProto.DOUBLE, None)], [("Y", onnx.TensorProto.DOUBLE, None)],
                           {"U": u})
        model.opset_import.append(helper.make_opsetid("ai.tfpopef", 1))
        got = from_blocked(run_internal(model, {"X": to_blocked(x)})[0])
        windows = np.lib.stride_tricks.sliding_window_view(x[0], (3, 3), axis=(1, 2))  # [C, tile, tile, 3, 3]
        want = np.einsum("cijkl,ockl->oij", windows, w)
        np.testing.assert_allclose(got[0], want, rtol=1e-9, atol=1e-9)


def test_winograd_option_is_checked():
    assert CompilerOptions().winograd == "auto"
    assert CompilerOptions(winograd="off").validate().to_dict()["winograd"] == "off"
    with pytest.raises(ConfigError, match="CompilerOptions.winograd must be one of auto, off, f2x2, f4x4, got 'on'"):
        CompilerOptions(winograd="on").validate()


def test_malformed_winograd_node_fails_lowering_by_name():
    rng = np.random.default_rng(0)
    u = rng.standard_normal((25, 1, 2, 8, 16)).astype(np.float32)
    node = helper.make_node("NchwcWinogradConv", ["X", "U"], ["Y"], name="bad", domain="ai.tfpopef",
                            pads=[1, 1, 1, 1])
    model = make_model([node], [("X", F32, [1, 2, 5, 5, 8])], [("Y", F32, [1, 2, 5, 5, 8])], {"U": u})
    model.opset_import.append(helper.make_opsetid("ai.tfpopef", 1))
    with pytest.raises(Exception, match="bad.*25 points"):
        lower_graph(model, WeightStore(), "test.onnx", prepare_body=prepare_control_flow_body)


def test_pass_alone_without_blocked_convs_is_a_no_op():
    model = resnet_like()
    out = run_passes(onnx.ModelProto.FromString(model.SerializeToString()), ["to_winograd_conv"],
                     PassContext(model_name="test.onnx", winograd="f4x4"))
    assert out.SerializeToString() == model.SerializeToString()
