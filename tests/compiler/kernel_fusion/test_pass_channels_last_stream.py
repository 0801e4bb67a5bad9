"""sink_transposes_below_elementwise (an elementwise op of transposed operands -> one Transpose
after it) and fold_transposes_into_nchwc_reorders (a channels-last Transpose next to a
ToNchwc / FromNchwc -> their channels_last form). Each case checks the graph after the
passes and the numerics: onnx's ReferenceEvaluator on the rewritten model against the original
and, for a ConvNeXt-style network through the whole kernel fusion pipeline, the emulator
against onnxruntime in fp32 and fp16."""
import numpy as np
import pytest
from onnx import helper

from compiler.kernel_fusion import run_kernel_fusions
from compiler.onnx_graph.internal_ops import DOMAIN
from compiler_test_helpers import (F32, assert_same_outputs, check_kernel_fusion_numerics, make_model, op_types,
                                   random_feeds, run_pass)
from nchwc_reference_ops import run_internal
from test_pass_to_nchwc_layout import Net, attrs_of, counts

SINK = "sink_transposes_below_elementwise"
TO_NCHW, TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]


def _transposed_pair(op_type, second_shape=(1, 4, 5, 8), extra_outputs=()):
    n = helper.make_node
    nodes = [n("Transpose", ["A"], ["TA"], perm=TO_NCHW), n("Transpose", ["B"], ["TB"], perm=TO_NCHW),
             n(op_type, ["TA", "TB"], ["Y"])]
    outputs = [("Y", F32, [1, 8, 4, 5])] + [(name, F32, None) for name in extra_outputs]
    return make_model(nodes, [("A", F32, [1, 4, 5, 8]), ("B", F32, list(second_shape))], outputs)


@pytest.mark.parametrize("op_type", ["Add", "Sub", "Mul", "Div"])
def test_op_of_two_alike_transposes_becomes_one_transpose_after_it(op_type):
    model = _transposed_pair(op_type)
    out = run_pass(model, SINK)
    assert op_types(out) == [op_type, "Transpose"]
    assert list(out.graph.node[0].input) == ["A", "B"]  # operand order kept (Sub, Div)
    assert out.graph.node[1].output[0] == "Y"
    feeds = random_feeds(model)
    assert_same_outputs(model, out, feeds)


def test_transposes_read_elsewhere_stay():
    """Both Transposes are also graph outputs: sinking would add a third one."""
    model = _transposed_pair("Add", extra_outputs=("TA", "TB"))
    assert op_types(run_pass(model, SINK)) == ["Transpose", "Transpose", "Add"]


def test_broadcast_operand_is_left_alone():
    model = _transposed_pair("Add", second_shape=(1, 1, 1, 8))
    model.graph.output[0].type.tensor_type.shape.dim[2].dim_value = 4
    assert op_types(run_pass(model, SINK)) == ["Transpose", "Transpose", "Add"]


def test_convolution_operand_gets_the_inverse_transpose_other_operands_do_not():
    """A stage's first residual is the downsampling convolution's output: it gets the inverse
    Transpose (its FromNchwc will write channels last); a Relu's output is left alone."""
    net = Net(1)
    for first in ("conv", "relu"):
        net.nodes.clear()
        c = net.conv("X", 8, 8, k=1, out="c")
        a = net.op("Relu", [c], out="r") if first == "relu" else c
        t = net.op("Transpose", ["M"], perm=TO_NCHW)
        net.op("Add", [a, t], out="Y")
        model = net.model([("X", F32, [1, 8, 4, 5]), ("M", F32, [1, 4, 5, 8])], ["Y"])
        out = run_pass(model, SINK)
        if first == "relu":
            assert op_types(out) == op_types(model)
            continue
        assert op_types(out) == ["Conv", "Transpose", "Add", "Transpose"]
        assert [attrs_of(n)["perm"] for n in out.graph.node if n.op_type == "Transpose"] == [TO_NHWC, TO_NCHW]
        assert_same_outputs(model, out, random_feeds(model))


# --- a ConvNeXt-style network through the whole kernel fusion pipeline ---------------------------
def channel_layernorm(net, x, channels):
    """Keras LayerNormalization over the channels of NCHW x, as tf2onnx writes it for ConvNeXt."""
    mean = net.op("ReduceMean", [x], axes=[1])
    d = net.op("Sub", [x, mean])
    var = net.op("ReduceMean", [net.op("Mul", [d, d])], axes=[1])
    r = net.op("Reciprocal", [net.op("Sqrt", [net.op("Add", [var, net.const(np.full((1, 1, 1, 1), 1e-6))])])])
    m = net.op("Mul", [r, net.const(net.rng.uniform(0.5, 1.5, (1, channels, 1, 1)))])
    shift = net.op("Mul", [net.op("Neg", [mean]), m])
    return net.op("Add", [net.op("Mul", [x, m]), net.op("Add", [shift, net.const(
        net.rng.standard_normal((1, channels, 1, 1)))])])


def convnext_block(net, r, channels):
    """Depthwise 3x3 (NCHW) -> LayerNorm -> channels last -> MatMul, Relu, MatMul, layer scale
    -> NCHW -> + residual."""
    d = net.conv(r, channels, channels, k=3, group=channels, pads=[1, 1, 1, 1])
    t = net.op("Transpose", [channel_layernorm(net, d, channels)], perm=TO_NHWC)
    w1 = net.const(net.rng.standard_normal((channels, 2 * channels)) / np.sqrt(channels))
    w2 = net.const(net.rng.standard_normal((2 * channels, channels)) / np.sqrt(2 * channels))
    h = net.op("MatMul", [net.op("Relu", [net.op("MatMul", [t, w1])]), w2])
    scaled = net.op("Mul", [h, net.const(net.rng.uniform(0.5, 1.5, channels))])
    return net.op("Add", [r, net.op("Transpose", [scaled], perm=TO_NCHW)])


def convnext_model():
    """NHWC image -> 2x2/2 stem + LayerNorm, two blocks at 16 channels, LayerNorm + 2x2/2
    downsampling to 24, two blocks, global average pool."""
    net = Net(3)
    x = net.op("Transpose", ["X"], perm=TO_NCHW)
    r = channel_layernorm(net, net.conv(x, 3, 16, k=2, strides=[2, 2]), 16)
    for _ in range(2):
        r = convnext_block(net, r, 16)
    r = net.conv(channel_layernorm(net, r, 16), 16, 24, k=2, strides=[2, 2])
    for _ in range(2):
        r = convnext_block(net, r, 24)
    net.op("GlobalAveragePool", [r], out="Y")
    return net.model([("X", F32, [2, 16, 12, 3])], ["Y"], opset=17)


def test_convnext_stream_runs_channels_last_between_blocked_depthwise_convolutions():
    model = convnext_model()
    fused = run_kernel_fusions(model, "convnext.onnx")
    ops = counts(fused)
    # Left: the pool's Transpose (the input's folds into the stem, which reads X channels last).
    assert ops["Transpose"] == 1, ops
    stem = next(n for n in fused.graph.node if n.op_type == "NchwcConv")
    assert stem.input[0] == "X" and attrs_of(stem).get("channels_last") == 1
    # The blocks' depthwise + LayerNorm pairs are ChannelsLastDepthwiseConvs (fuse_channels_last_depthwise).
    fused_blocks = ops.get("ChannelsLastDepthwiseConv", 0)
    assert ops["LayerNormalization"] + fused_blocks == 6 and ops["NchwcConv"] + fused_blocks == 6
    reorders = [n for n in fused.graph.node if n.domain == DOMAIN and n.op_type in ("ToNchwc", "FromNchwc")]
    assert reorders and all(attrs_of(n).get("channels_last") == 1 for n in reorders), \
        [(n.op_type, attrs_of(n)) for n in reorders]


def test_convnext_stream_matches_onnxruntime_on_the_emulator():
    model = convnext_model()
    feeds = random_feeds(model)
    check_kernel_fusion_numerics(model, feeds)


# --- fold_transposes_into_nchwc_reorders --------------------------------------------------------
def _reorder_round_trip(extra_outputs=()):
    """X [N, H, W, C] -> Transpose -> ToNchwc -> FromNchwc -> Transpose -> Y [N, H, W, C]."""
    n = helper.make_node
    nodes = [n("Transpose", ["X"], ["T"], perm=TO_NCHW), n("ToNchwc", ["T"], ["B"], domain=DOMAIN),
             n("FromNchwc", ["B"], ["P"], domain=DOMAIN), n("Transpose", ["P"], ["Y"], perm=TO_NHWC)]
    model = make_model(nodes, [("X", F32, [2, 4, 5, 16])],
                       [("Y", F32, [2, 4, 5, 16])] + [(name, F32, [2, 16, 4, 5]) for name in extra_outputs])
    model.opset_import.append(helper.make_opsetid(DOMAIN, 1))
    return model


def test_transposes_fold_into_channels_last_reorders():
    model = _reorder_round_trip()
    out = run_pass(model, "fold_transposes_into_nchwc_reorders")
    assert op_types(out) == ["ToNchwc", "FromNchwc"]
    assert [attrs_of(n) for n in out.graph.node] == [{"channels_last": 1}] * 2
    assert list(out.graph.node[0].input) == ["X"] and list(out.graph.node[1].output) == ["Y"]
    feeds = random_feeds(model)
    np.testing.assert_array_equal(run_internal(out, feeds)[0], feeds["X"])


def test_transposes_read_elsewhere_do_not_fold():
    """T is also a graph output (it stays; the ToNchwc still reads X directly), P too (the
    FromNchwc keeps writing NCHW)."""
    model = _reorder_round_trip(extra_outputs=("T", "P"))
    out = run_pass(model, "fold_transposes_into_nchwc_reorders")
    assert op_types(out) == ["Transpose", "ToNchwc", "FromNchwc", "Transpose"]
    assert [attrs_of(n).get("channels_last") for n in out.graph.node if n.domain == DOMAIN] == [1, None]
    feeds = random_feeds(model)
    x, nchw = feeds["X"], feeds["X"].transpose(TO_NCHW)
    for got, want in zip(run_internal(out, feeds), [x, nchw, nchw]):
        np.testing.assert_array_equal(got, want)
