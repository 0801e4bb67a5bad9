"""fuse_channels_last_depthwise: ToNchwc(channels_last) -> depthwise NchwcConv ->
FromNchwc(channels_last) -> LayerNormalization(last axis) becomes one ChannelsLastDepthwiseConv
reading the channels-last tensor, with the normalization as its epilogue. Each case checks the
graph after the pass and, where it rewrites, the numerics (onnx's ReferenceEvaluator with the
internal ops' numpy references, before against after); the ConvNeXt-style network runs on the
emulator against onnxruntime in fp32 and fp16."""
import numpy as np
import pytest
from onnx import helper

from compiler.kernel_fusion import run_kernel_fusions
from compiler.onnx_graph.internal_ops import DOMAIN
from compiler_test_helpers import F16, F32, check_kernel_fusion_numerics, make_model, op_types, random_feeds, run_pass
from nchwc_reference_ops import run_internal
from test_pass_channels_last_stream import convnext_model
from test_pass_to_nchwc_layout import attrs_of, counts

PASS = "fuse_channels_last_depthwise"


def _chain(c=16, h=6, w=7, k=7, strides=(1, 1), pads=None, bias=True, ln_bias=True, axis=-1, ln_param_shape=None,
           source="to_nchwc", extra_outputs=(), dtype=F32, seed=0):
    """X [2, H, W, C] -> ToNchwc(channels_last) -> depthwise NchwcConv -> FromNchwc(channels_last) ->
    LayerNormalization -> Y. source "from_nchwc": X is blocked [2, C/8, H, W, 8] and the
    channels-last copy is a FromNchwc of it that is also a graph output (a stage's first block)."""
    rng = np.random.default_rng(seed)
    np_type = np.float16 if dtype == F16 else np.float32
    pads = list(pads if pads is not None else [k // 2] * 4)
    oh = (h + pads[0] + pads[2] - k) // strides[0] + 1
    ow = (w + pads[1] + pads[3] - k) // strides[1] + 1
    n = helper.make_node
    inits = {"W": (rng.standard_normal((c // 8, k, k, 8)) / k).astype(np_type),
             "gamma": rng.uniform(0.5, 1.5, ln_param_shape or [c]).astype(np_type)}
    if bias:
        inits["B"] = rng.standard_normal(c).astype(np_type)
    if ln_bias:
        inits["beta"] = rng.standard_normal(ln_param_shape or [c]).astype(np_type)
    nodes, outputs = [], []
    if source == "to_nchwc":
        inputs = [("X", dtype, [2, h, w, c])]
        nodes.append(n("ToNchwc", ["X"], ["Xb"], domain=DOMAIN, channels_last=1))
    else:
        inputs = [("Xb", dtype, [2, c // 8, h, w, 8])]
        nodes.append(n("FromNchwc", ["Xb"], ["Xcl"], domain=DOMAIN, channels_last=1))
        outputs.append(("Xcl", dtype, [2, h, w, c]))
    nodes += [n("NchwcConv", ["Xb", "W"] + (["B"] if bias else []), ["D"], domain=DOMAIN, group=c,
                kernel_shape=[k, k], strides=list(strides), dilations=[1, 1], pads=pads),
              n("FromNchwc", ["D"], ["Dcl"], domain=DOMAIN, channels_last=1),
              n("LayerNormalization", ["Dcl", "gamma"] + (["beta"] if ln_bias else []), ["Y"], axis=axis,
                epsilon=1e-6)]
    outputs = [("Y", dtype, [2, oh, ow, c])] + outputs
    outputs += [(name, dtype, None) for name in extra_outputs]
    model = make_model(nodes, inputs, outputs, inits, opset=17)
    model.opset_import.append(helper.make_opsetid(DOMAIN, 1))
    return model


def _assert_rewrites_and_matches(model, expected_ops, rtol=1e-5, atol=1e-5):
    out = run_pass(model, PASS)
    assert op_types(out) == expected_ops, op_types(out)
    feeds = random_feeds(model)
    want, got = run_internal(model, feeds), run_internal(out, feeds)
    for a, b in zip(want, got):
        np.testing.assert_allclose(b.astype(np.float64), a.astype(np.float64), rtol=rtol, atol=atol)
    return out


@pytest.mark.parametrize("bias,ln_bias", [(True, True), (False, True), (True, False), (False, False)])
def test_chain_becomes_one_step_with_the_layernorm(bias, ln_bias):
    out = _assert_rewrites_and_matches(_chain(bias=bias, ln_bias=ln_bias), ["ChannelsLastDepthwiseConv"])
    node = out.graph.node[0]
    assert node.domain == DOMAIN and list(node.output) == ["Y"]
    assert list(node.input) == ["X", "W", "B" if bias else "", "gamma"] + (["beta"] if ln_bias else [])
    attrs = attrs_of(node)
    assert attrs["layer_norm"] == 1 and attrs["epsilon"] == pytest.approx(1e-6)
    assert attrs["kernel_shape"] == [7, 7] and attrs["pads"] == [3, 3, 3, 3] and "group" not in attrs


@pytest.mark.parametrize("k,strides,pads", [(3, (1, 1), None), (5, (2, 2), [2, 2, 2, 2]), (4, (1, 1), [1, 2, 2, 1])])
def test_other_windows_are_rewritten_with_their_window(k, strides, pads):
    out = _assert_rewrites_and_matches(_chain(k=k, strides=strides, pads=pads), ["ChannelsLastDepthwiseConv"])
    assert attrs_of(out.graph.node[0])["strides"] == list(strides)


def test_float16_chain_is_rewritten():
    _assert_rewrites_and_matches(_chain(dtype=F16), ["ChannelsLastDepthwiseConv"], rtol=2e-2, atol=2e-2)


def test_a_stage_first_block_reads_the_existing_channels_last_copy():
    out = _assert_rewrites_and_matches(_chain(source="from_nchwc"), ["FromNchwc", "ChannelsLastDepthwiseConv"])
    assert list(out.graph.node[1].input)[0] == "Xcl"


def test_a_channels_last_copy_placed_after_the_layernorm_is_sorted_before_the_new_step():
    """The residual's FromNchwc may come after the LayerNormalization in node order (ConvNeXt's
    stage-first blocks): the rewritten graph stays topologically sorted, so shape inference
    reaches the new step with X's type."""
    model = _chain(source="from_nchwc")
    reorder = type(model.graph.node[0])()
    reorder.CopyFrom(model.graph.node[0])
    del model.graph.node[0]
    model.graph.node.append(reorder)
    out = _assert_rewrites_and_matches(model, ["FromNchwc", "ChannelsLastDepthwiseConv"])
    from compiler.onnx_graph.type_inference import infer_types
    assert list(infer_types(out).types["Y"].shape) == [2, 6, 7, 16]


def test_to_nchwc_read_elsewhere_stays():
    out = _assert_rewrites_and_matches(_chain(extra_outputs=("Xb",)), ["ToNchwc", "ChannelsLastDepthwiseConv"])
    assert list(out.graph.node[1].input)[0] == "X"


@pytest.mark.parametrize("case", ["ln_on_another_axis", "ln_params_broadcast", "conv_output_read_elsewhere",
                                  "channels_last_copy_read_elsewhere", "no_channels_last_source", "activation"])
def test_cases_that_must_not_rewrite(case):
    if case == "ln_on_another_axis":
        model = _chain(axis=2, ln_param_shape=[7, 16])
    elif case == "ln_params_broadcast":
        model = _chain(ln_param_shape=[1])
    elif case == "conv_output_read_elsewhere":
        model = _chain(extra_outputs=("D",))
    elif case == "channels_last_copy_read_elsewhere":
        model = _chain(extra_outputs=("Dcl",))
    elif case == "no_channels_last_source":  # X comes blocked and nothing gives it channels last
        model = _chain(source="from_nchwc")
        model.graph.node.remove(model.graph.node[0])
        del model.graph.output[1]
    else:
        model = _chain()
        model.graph.node[1].attribute.append(helper.make_attribute("activation", "Relu"))
    assert op_types(run_pass(model, PASS)) == op_types(model)


def test_convnext_network_runs_its_depthwise_convolutions_channels_last():
    """Of convnext_model's four blocks, each depthwise + LayerNorm is one step (the stage's first
    block in the second stage reads the residual's FromNchwc); the stem's and the downsampling
    LayerNorms stay, and no ToNchwc is left but the one before the downsampling convolution."""
    fused = run_kernel_fusions(convnext_model(), "convnext.onnx")
    ops = counts(fused)
    assert ops["ChannelsLastDepthwiseConv"] == 4 and ops["LayerNormalization"] == 2, ops
    assert ops["NchwcConv"] == 2 and ops["ToNchwc"] == 1, ops
    assert all(attrs_of(n)["layer_norm"] == 1 for n in fused.graph.node if n.op_type == "ChannelsLastDepthwiseConv")


def test_convnext_network_matches_onnxruntime_on_the_emulator():
    model = convnext_model()
    check_kernel_fusion_numerics(model, random_feeds(model))
