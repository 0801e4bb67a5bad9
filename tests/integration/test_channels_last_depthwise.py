"""ConvNeXt-style blocks against onnxruntime: NHWC input, a 2x2/2 stem convolution and
LayerNormalization, then blocks of depthwise 7x7 (NCHW Conv between Transposes, as tf2onnx
writes Keras' channels-last model) -> LayerNormalization over the channels -> Dense (MatMul),
Relu, Dense -> layer scale -> + residual. The kernel fusion pipeline runs each block's depthwise
and LayerNormalization as one ChannelsLastDepthwiseConv on the channels-last stream
(fuse_channels_last_depthwise); float32 within 1e-4 of onnxruntime, float16 within the float16
tolerance, on the default SIMD path and in a process forced to the portable one."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from e2e_helpers import (assert_matches_fp32_reference, check_every_case_in_new_process, run_onnxruntime,
                         run_with_profile)

F = TensorProto.FLOAT
TO_NCHW, TO_NHWC = [0, 3, 1, 2], [0, 2, 3, 1]

# name: (batch, input height, input width, channels, blocks, depthwise bias); the blocks' planes
# are half the input's sides
CASES = {
    "b1_c32_14x14_2blocks": (1, 28, 28, 32, 2, True),
    "b2_c24_7x7_3blocks": (2, 14, 14, 24, 3, False),
    "b1_c16_9x11": (1, 18, 22, 16, 2, True),
}


def convnext_blocks(batch, height, width, channels, blocks, dw_bias, seed=0):
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def node(op, inputs, output, **attrs):
        nodes.append(helper.make_node(op, inputs, [output], **attrs))
        return output

    def layernorm(x, i):
        return node("LayerNormalization", [x, const(f"g{i}", rng.uniform(0.5, 1.5, channels)),
                                           const(f"b{i}", rng.standard_normal(channels) * 0.1)], f"ln{i}",
                    axis=-1, epsilon=1e-6)

    x = node("Transpose", ["X"], "x_nchw", perm=TO_NCHW)
    stem = node("Conv", [x, const("w_stem", rng.standard_normal((channels, 3, 2, 2)) * 0.5)], "stem",
                kernel_shape=[2, 2], strides=[2, 2])
    r = layernorm(node("Transpose", [stem], "stem_nhwc", perm=TO_NHWC), "stem")
    for i in range(blocks):
        t = node("Transpose", [r], f"t{i}", perm=TO_NCHW)
        dw_inputs = [t, const(f"wd{i}", rng.standard_normal((channels, 1, 7, 7)) * 0.2)]
        if dw_bias:
            dw_inputs.append(const(f"bd{i}", rng.standard_normal(channels) * 0.1))
        d = node("Conv", dw_inputs, f"dw{i}", kernel_shape=[7, 7], pads=[3, 3, 3, 3], group=channels)
        h = layernorm(node("Transpose", [d], f"dw{i}_nhwc", perm=TO_NHWC), i)
        h = node("MatMul", [h, const(f"w1_{i}", rng.standard_normal((channels, 4 * channels)) / np.sqrt(channels))],
                 f"up{i}")
        h = node("Relu", [h], f"relu{i}")
        h = node("MatMul", [h, const(f"w2_{i}", rng.standard_normal((4 * channels, channels)) / np.sqrt(4 * channels))],
                 f"down{i}")
        h = node("Mul", [h, const(f"gamma{i}", rng.uniform(0.5, 1.5, channels))], f"scaled{i}")
        r = node("Add", [r, h], f"res{i}")
    node("ReduceMean", [r], "Y", axes=[1, 2], keepdims=0)
    graph = helper.make_graph(nodes, "convnext_blocks",
                              [helper.make_tensor_value_info("X", F, [batch, height, width, 3])],
                              [helper.make_tensor_value_info("Y", F, [batch, channels])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def check_case(name, precision):
    batch, height, width, channels, blocks, dw_bias = CASES[name]
    model = convnext_blocks(batch, height, width, channels, blocks, dw_bias)
    x_shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(1).standard_normal(x_shape).astype(np.float32)
    want = run_onnxruntime(model, {"X": x})["Y"]
    got, ops = run_with_profile(model, x, precision)
    # Every block's depthwise + LayerNorm ran as one channels-last step; the stem's LayerNorm stays.
    assert ops.count("ChannelsLastDepthwiseConv") == blocks and ops.count("LayerNormalization") == 1, \
        f"{name}: {sorted(ops)}"
    assert "ToNchwc" not in ops, f"{name}: {ops}"
    assert_matches_fp32_reference(got, want, precision, name)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", list(CASES))
def test_channels_last_depthwise_blocks_vs_onnxruntime(name, precision):
    check_case(name, precision)


def test_channels_last_depthwise_blocks_vs_onnxruntime_on_the_portable_path():
    """Every case again in a process on the portable SIMD path (its own build of the tiles)."""
    check_every_case_in_new_process("test_channels_last_depthwise", len(CASES), TF_POPEF_SIMD="portable")
