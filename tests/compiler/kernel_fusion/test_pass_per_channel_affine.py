"""per_channel_affine_to_depthwise_conv: DenseNet's pre-activation BatchNorm (Mul, Add by
per-channel constants, then Relu) becomes one 1x1 depthwise convolution with the Relu as its
epilogue, blocked by to_nchwc_layout. Each case checks the graph after the pass (or the whole
kernel fusion pipeline) and the emulator against onnxruntime on the original model in fp32 and
fp16; what does not fit is left as it was."""
import numpy as np
import pytest
from onnx import helper

from compiler.kernel_fusion import run_kernel_fusions
from compiler.onnx_graph.internal_ops import DOMAIN
from compiler_test_helpers import F32, check_kernel_fusion_numerics, make_model, op_types, random_feeds, run_pass
from test_pass_to_nchwc_layout import check, counts, densenet_layer

PASS = "per_channel_affine_to_depthwise_conv"


def affine_model(channels=16, scale_shape=None, bias_shape=None, relu=True, extra_output=False, swap=False):
    rng = np.random.default_rng(channels)
    scale_shape = scale_shape or (1, channels, 1, 1)
    bias_shape = bias_shape or (1, channels, 1, 1)
    n = helper.make_node
    mul_inputs = ["S", "X"] if swap else ["X", "S"]
    nodes = [n("Mul", mul_inputs, ["M"]), n("Add", ["B", "M"] if swap else ["M", "B"], ["A" if relu else "Y"])]
    if relu:
        nodes.append(n("Relu", ["A"], ["Y"]))
    shape = [2, channels, 5, 6]
    outputs = [("Y", F32, shape)] + ([("M", F32, shape)] if extra_output else [])
    inits = {"S": rng.uniform(0.5, 1.5, scale_shape).astype(np.float32),
             "B": rng.standard_normal(bias_shape).astype(np.float32)}
    return make_model(nodes, [("X", F32, shape)], outputs, inits)


@pytest.mark.parametrize("swap", [False, True])
@pytest.mark.parametrize("scale_shape,bias_shape", [(None, None), ((16, 1, 1), (1,)), ((1,), (16, 1, 1))])
def test_batchnorm_relu_becomes_one_blocked_depthwise_conv(swap, scale_shape, bias_shape):
    model = affine_model(scale_shape=scale_shape, bias_shape=bias_shape, swap=swap)
    out = run_pass(model, PASS)
    assert op_types(out) == ["Conv", "Relu"]
    conv = out.graph.node[0]
    assert {a.name: helper.get_attribute_value(a) for a in conv.attribute} == {"group": 16, "kernel_shape": [1, 1]}
    fused = run_kernel_fusions(model)
    assert [(n.domain, n.op_type) for n in fused.graph.node] == [(DOMAIN, "ToNchwc"), (DOMAIN, "NchwcConv"),
                                                                 (DOMAIN, "FromNchwc")]
    activation = {a.name: helper.get_attribute_value(a) for a in fused.graph.node[1].attribute}["activation"]
    assert activation == b"Relu"
    check_kernel_fusion_numerics(model, random_feeds(model))


def test_affine_without_activation():
    model = affine_model(relu=False)
    assert op_types(run_pass(model, PASS)) == ["Conv"]
    check_kernel_fusion_numerics(model, random_feeds(model))


@pytest.mark.parametrize("case", ["channels_not_a_block_multiple", "mul_output_read_elsewhere", "spatial_scale",
                                  "two_scalars"])
def test_what_does_not_fit_is_left_alone(case):
    model = {"channels_not_a_block_multiple": lambda: affine_model(channels=12),
             "mul_output_read_elsewhere": lambda: affine_model(extra_output=True),
             "spatial_scale": lambda: affine_model(scale_shape=(1, 16, 5, 1)),
             "two_scalars": lambda: affine_model(scale_shape=(1,), bias_shape=(1, 1, 1, 1))}[case]()
    assert op_types(run_pass(model, PASS)) == op_types(model)


def test_densenet_layers_run_their_batchnorms_as_blocked_depthwise_convolutions():
    """tests/compiler/kernel_fusion/test_pass_to_nchwc_layout.py's DenseNet layers through the
    whole pipeline: each BatchNorm + Relu is one NchwcConv, nothing reads NCHW in between."""
    model = densenet_layer().model([("X", F32, [2, 8, 6, 6])], ["Y"])
    out = run_kernel_fusions(model)
    assert counts(out) == {"ToNchwc": 1, "NchwcConv": 9, "Concat": 3, "NchwcAveragePool": 1, "FromNchwc": 1}
    check(model, out)
    check_kernel_fusion_numerics(model, random_feeds(model))
