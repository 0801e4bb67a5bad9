"""ConvNeXt-style blocks with a tiny layer scale, in float16, against onnxruntime: the residual
stream [N, T, C] -> LayerNormalization -> Dense (MatMul), Relu, Dense (+ a zero bias, as an
untrained Keras export has) -> layer scale γ -> + residual. W·γ is below float16's normal range,
so fold_column_scale_into_matmul stores W·γ·2^k and fuse_epilogue takes the 2^-k as
FusedMatMul's alpha (applied in float32): every block is LayerNorm + two FusedMatMuls, no
elementwise step. The residual is small against the scaled branch, so the check sees the branch
(its error must be a small part of what the branch adds). Default path, then the portable SIMD
path and OpenBLAS (TF_POPEF_GEMM=blas: the unpacked kernel's alpha) in new processes."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from e2e_helpers import (assert_matches_fp32_reference, check_every_case_in_new_process, run_onnxruntime,
                         run_with_profile)

F = TensorProto.FLOAT

# name: (batch, tokens, channels, blocks, γ (None: uniform 0.5e-5 to 1.5e-5 per channel), zero bias)
CASES = {
    "b1_t49_c32_keras_gamma": (1, 49, 32, 2, 1e-6, True),
    "b2_t16_c24_per_channel_gamma": (2, 16, 24, 3, None, False),
    "b1_t9_c64_per_channel_gamma_bias": (1, 9, 64, 1, None, True),
}


def layer_scale_blocks(batch, tokens, channels, blocks, gamma, zero_bias, seed=0):
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def const(name, value):
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    def node(op, inputs, output, **attrs):
        nodes.append(helper.make_node(op, inputs, [output], **attrs))
        return output

    # Big enough products that the branch, scaled by γ, outweighs the residual stream.
    down_scale = 100.0 if gamma is None else 3e3
    r = "X"
    for i in range(blocks):
        h = node("LayerNormalization", [r, const(f"g{i}", rng.uniform(0.5, 1.5, channels)),
                                        const(f"b{i}", rng.standard_normal(channels) * 0.1)], f"ln{i}",
                 axis=-1, epsilon=1e-6)
        h = node("MatMul", [h, const(f"w1_{i}", rng.standard_normal((channels, 4 * channels)) * 8 / np.sqrt(channels))],
                 f"up{i}")
        h = node("Relu", [h], f"relu{i}")
        h = node("MatMul", [h, const(f"w2_{i}", rng.standard_normal((4 * channels, channels)) * down_scale
                                     / np.sqrt(4 * channels))], f"down{i}")
        if zero_bias:
            h = node("Add", [h, const(f"bias{i}", np.zeros(channels))], f"biased{i}")
        scale = rng.uniform(0.5e-5, 1.5e-5, channels) if gamma is None else np.full(channels, gamma)
        h = node("Mul", [h, const(f"gamma{i}", scale)], f"scaled{i}")
        r = node("Add", [r, h], f"res{i}")
    node("Identity", [r], "Y")
    shape = [batch, tokens, channels]
    graph = helper.make_graph(nodes, "layer_scale_blocks", [helper.make_tensor_value_info("X", F, shape)],
                              [helper.make_tensor_value_info("Y", F, shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def check_case(name, precision):
    batch, tokens, channels, blocks, gamma, zero_bias = CASES[name]
    model = layer_scale_blocks(batch, tokens, channels, blocks, gamma, zero_bias)
    x = (np.random.default_rng(1).standard_normal([batch, tokens, channels]) * 1e-3).astype(np.float32)
    want = run_onnxruntime(model, {"X": x})["Y"]
    got, ops = run_with_profile(model, x, precision)
    assert ops.count("FusedMatMul") == 2 * blocks and "FusedElementwise" not in ops and "Mul" not in ops, \
        f"{name} {precision}: {ops}"
    assert_matches_fp32_reference(got, want, precision, name)
    branch = np.linalg.norm(want - x)  # what the blocks' scaled branches add to the stream
    assert branch > 2 * np.linalg.norm(x), f"{name}: the branch {branch:.2e} is too small to check"
    error = np.linalg.norm(got - want)
    assert error < (1e-2 if precision == "fp16" else 1e-5) * branch, \
        f"{name} {precision}: error {error:.2e} against the branch's {branch:.2e}"


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", list(CASES))
def test_layer_scale_blocks_vs_onnxruntime(name, precision):
    check_case(name, precision)


@pytest.mark.parametrize("env", [{"TF_POPEF_SIMD": "portable"}, {"TF_POPEF_GEMM": "blas"}])
def test_layer_scale_blocks_vs_onnxruntime_on_the_other_paths(env):
    check_every_case_in_new_process("test_layer_scale_fp16", len(CASES), **env)
