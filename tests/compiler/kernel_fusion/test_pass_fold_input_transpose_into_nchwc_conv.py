"""fold_input_transpose_into_nchwc_conv: the NHWC input's Transpose -> the stem NchwcConv's
channels-last form. Each case builds a small NHWC network (Transpose -> Conv stem -> ...), runs
the whole kernel fusion pipeline (or the pass alone on what to_nchwc_layout wrote), checks the
graph (the Transpose gone, channels_last = 1, the weights [M/G, KH, KW, C, G]), that onnx.checker
and the lowering take it, the numerics with onnx's ReferenceEvaluator plus the numpy references of
the internal ops against onnxruntime on the original model, and, for the real stem shapes, the
emulator against onnxruntime in fp32 and fp16. The cases that must not fold keep their
Transpose."""
import copy

import numpy as np
import pytest
from onnx import numpy_helper

from compiler.converter.context import PassContext
from compiler.converter.pipeline import prepare_control_flow_body, run_passes
from compiler.kernel_fusion import KERNEL_FUSION_PIPELINE, run_kernel_fusions
from compiler.lowering.lower_graph import lower_graph
from compiler.lowering.weights import WeightStore
from compiler.onnx_graph.internal_ops import DOMAIN
from compiler_test_helpers import F32, check_kernel_fusion_numerics, op_types, random_feeds, run_pass
from test_pass_to_nchwc_layout import Net, attrs_of, check, init_shape, node_named

PASS = "fold_input_transpose_into_nchwc_conv"
TO_NCHW = [0, 3, 1, 2]


def stem_net(c=3, m=32, k=3, stride=2, pads=(0, 0, 1, 1), hw=(16, 16), n=1, activation="Relu", perm=TO_NCHW,
             transpose_out=False, second_reader=False):
    """X [N, H, W, C] -> Transpose(perm) -> Conv k x k / stride (-> activation) -> 1x1 conv -> Y."""
    net = Net(3)
    t = net.op("Transpose", ["X"], out="T", perm=list(perm))
    s = net.conv(t, c, m, k=k, strides=[stride, stride], pads=list(pads), out="stem")
    if activation == "Relu":
        s = net.op("Relu", [s], out="stem_act")
    elif activation == "Swish":
        s = net.op("Mul", [s, net.op("Sigmoid", [s])], out="stem_act")
    net.conv(s, m, 16, out="Y")
    outputs = ["Y"]
    if second_reader:
        net.op("ReduceMean", [t], out="Tmean", axes=[2, 3], keepdims=1)
        outputs.append("Tmean")
    if transpose_out:
        outputs.append("T")
    shape = [n, hw[0], hw[1], c] if list(perm) == TO_NCHW else [n, c, hw[0], hw[1]]
    return net.model([("X", F32, shape)], outputs)


def _fused(model):
    return run_kernel_fusions(model, inverted_residual="off")


def test_pipeline_runs_it_after_the_reorder_folds():
    assert KERNEL_FUSION_PIPELINE.index(PASS) == KERNEL_FUSION_PIPELINE.index("fold_transposes_into_nchwc_reorders") + 1


@pytest.mark.parametrize("c", [1, 3])
def test_transpose_folds_into_the_stem(c):
    model = stem_net(c=c)
    out = _fused(model)
    assert op_types(out) == ["NchwcConv", "NchwcConv", "FromNchwc"]
    stem = node_named(out, "stem")
    assert stem.input[0] == "X" and attrs_of(stem)["channels_last"] == 1
    assert init_shape(out, stem.input[1]) == (2, 3, 3, c, 16)  # [M/G, KH, KW, C, G], M = 32 in pairs of blocks
    # the plain-input weights are gone with the Transpose
    assert not any(t.name.endswith("__nchwc") and t.dims[1:2] == [c] and len(t.dims) == 5
                   for t in out.graph.initializer if t.name.startswith("stem"))
    check(model, out)


def test_weights_are_the_plain_input_ones_with_c_after_the_window():
    model = stem_net(c=3, m=24)
    plain = _without_the_fold(model)
    assert "Transpose" in op_types(plain)
    out = run_pass(plain, PASS)
    w_plain = _initializer(plain, node_named(plain, "stem").input[1])
    w = _initializer(out, node_named(out, "stem").input[1])
    assert w_plain.shape == (3, 3, 3, 3, 8) and w.shape == (3, 3, 3, 3, 8)  # M = 24: groups of one block
    np.testing.assert_array_equal(w, w_plain.transpose(0, 2, 3, 1, 4))
    check(model, out)


def _without_the_fold(model):
    """The kernel fusion pipeline up to (without) this pass."""
    names = KERNEL_FUSION_PIPELINE[:KERNEL_FUSION_PIPELINE.index(PASS)]
    return run_passes(copy.deepcopy(model), names, PassContext(model_name="<model>", winograd="auto",
                                                                inverted_residual="off"))


def _initializer(model, name):
    return numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == name))


@pytest.mark.parametrize("geometry", [
    dict(k=3, stride=2, pads=(0, 0, 1, 1), hw=(17, 16)),   # EfficientNet / MobileNetV2 stem (TF "same")
    dict(k=7, stride=2, pads=(3, 3, 3, 3), hw=(23, 21)),   # ResNet50 / DenseNet121
    dict(k=3, stride=2, pads=(0, 0, 0, 0), hw=(19, 19)),   # InceptionV3 (valid)
    dict(k=4, stride=4, pads=(0, 0, 0, 0), hw=(16, 20)),   # ConvNeXt patchify
    dict(k=3, stride=1, pads=(1, 1, 1, 1), hw=(9, 11)),
])
def test_stem_geometries_fold_and_match(geometry):
    model = stem_net(n=2, **geometry)
    out = _fused(model)
    assert "Transpose" not in op_types(out)
    assert attrs_of(node_named(out, "stem"))["channels_last"] == 1
    check(model, out)


def test_swish_stem_folds():
    model = stem_net(activation="Swish")
    out = _fused(model)
    assert "Transpose" not in op_types(out)
    stem = node_named(out, "stem")
    assert attrs_of(stem)["channels_last"] == 1 and attrs_of(stem)["activation"] == b"Swish"
    check(model, out)


def test_nchw_input_does_not_fold():
    """No Transpose in front (an NCHW model): the plain-input variant as before."""
    model = stem_net(perm=[0, 1, 2, 3])
    model.graph.node.remove(model.graph.node[0])
    model.graph.node[0].input[0] = "X"
    out = _fused(model)
    stem = node_named(out, "stem")
    assert stem.input[0] == "X" and "channels_last" not in attrs_of(stem)
    assert init_shape(out, stem.input[1]) == (2, 3, 3, 3, 16)
    check(model, out)


@pytest.mark.parametrize("c", [2, 4, 5])
def test_other_channel_counts_do_not_fold(c):
    """The runtime's channels-last tiles are instantiated for C = 1 and 3 only."""
    model = stem_net(c=c)
    out = _fused(model)
    assert op_types(out)[0] == "Transpose" and "channels_last" not in attrs_of(node_named(out, "stem"))
    check(model, out)


def test_blocked_input_does_not_fold():
    """C = 8: the conv reads a ToNchwc, which fold_transposes_into_nchwc_reorders makes channels last."""
    model = stem_net(c=8)
    out = _fused(model)
    assert op_types(out)[0] == "ToNchwc" and attrs_of(out.graph.node[0]) == {"channels_last": 1}
    assert "channels_last" not in attrs_of(node_named(out, "stem"))
    check(model, out)


@pytest.mark.parametrize("case", ["graph_output", "second_reader"])
def test_transpose_read_elsewhere_does_not_fold(case):
    model = stem_net(transpose_out=case == "graph_output", second_reader=case == "second_reader")
    out = _fused(model)
    assert "Transpose" in op_types(out)
    stem = node_named(out, "stem")
    assert stem.input[0] == "T" and "channels_last" not in attrs_of(stem)
    check(model, out)


def test_other_perm_does_not_fold():
    """[N, W, H, C] -> [N, C, H, W] (perm 0, 3, 2, 1) is not the NHWC input's transpose."""
    model = stem_net(perm=[0, 3, 2, 1], hw=(16, 16))
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 16
    model.graph.input[0].type.tensor_type.shape.dim[2].dim_value = 16
    model.graph.input[0].type.tensor_type.shape.dim[3].dim_value = 3
    out = _fused(model)
    assert op_types(out)[0] == "Transpose" and "channels_last" not in attrs_of(node_named(out, "stem"))
    check(model, out)


def test_second_run_is_a_no_op():
    out = _fused(stem_net())
    assert run_pass(out, PASS).SerializeToString() == out.SerializeToString()


def test_lowering_names_a_bad_channels_last_node():
    """channels_last = 1 on X with C = 5: the lowering refuses it, naming the node."""
    out = _fused(stem_net())
    stem = node_named(out, "stem")
    x = out.graph.input[0].type.tensor_type.shape
    x.dim[3].dim_value = 5
    with pytest.raises(Exception, match=r"stem.*channels_last = 1 with X \[1, 16, 16, 5\]"):
        lower_graph(out, WeightStore(), "test.onnx", prepare_body=prepare_control_flow_body)
    assert stem.domain == DOMAIN


@pytest.mark.parametrize("geometry", [
    dict(k=3, stride=2, pads=(0, 0, 1, 1), hw=(64, 64), activation="Swish"),  # EfficientNet's stem
    dict(k=3, stride=2, pads=(0, 0, 1, 1), hw=(64, 64), activation="Relu"),   # MobileNetV2's (Relu6 alike)
    dict(k=7, stride=2, pads=(3, 3, 3, 3), hw=(48, 48), activation="Relu"),   # ResNet50's
    dict(k=3, stride=2, pads=(0, 0, 0, 0), hw=(75, 75), activation="Relu"),   # InceptionV3's
])
def test_stems_on_the_emulator_match_onnxruntime(geometry):
    model = stem_net(n=2, **geometry)
    check_kernel_fusion_numerics(model, random_feeds(model))
