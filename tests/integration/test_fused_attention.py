"""FusedAttention end to end against onnxruntime: transformer encoder blocks as tf2onnx writes
attention (Q/K/V projections with biases, Reshape + Transpose per head, Q·Kᵀ, the 1/√d Mul,
Softmax, ·V, Transpose + Reshape back, output projection, residual), BERT-like (128 tokens, 4
heads of 64) at batch 1 (query-row blocks of one head spread over the threads) and 2,
ViT-like (197 tokens, 3 heads: key panels with a ragged end), and odd sizes with two stacked
blocks. float32 within 1e-4 of onnxruntime, float16 (Converter precision fp16) within the
float16 tolerance; the profile shows one FusedAttention per block and no Softmax or Transpose,
and one projection GEMM per block for Q, K and V (merge_qkv_projections: the kernel reads the
packed QKV); on the default SIMD path and in a process on the portable path with a 3-thread
pool. The packed form also matches the three-input form (the merge left out of the pipeline)
at BERT's sizes, batch 1 and 8."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from e2e_helpers import assert_matches_fp32_reference, check_every_case_in_new_process, run_onnxruntime, run_with_profile

F = TensorProto.FLOAT
# name: (batch, tokens, heads, head size, blocks)
CASES = {
    "bert_like_batch_1": (1, 128, 4, 64, 1),
    "bert_like_batch_2": (2, 128, 4, 64, 1),
    "vit_like_batch_1": (1, 197, 3, 64, 1),
    "odd_sizes_two_blocks": (3, 13, 3, 7, 2),
}


def encoder_blocks(batch, tokens, heads, d, blocks, seed=0):
    rng = np.random.default_rng(seed)
    width = heads * d
    inits = [numpy_helper.from_array(np.asarray(v, dtype), name) for name, v, dtype in (
        ("split", [batch, tokens, heads, d], np.int64), ("merge", [batch, tokens, width], np.int64),
        ("scale", 1 / np.sqrt(d), np.float32))]
    nodes = []

    def tensor(name, shape, scale):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    x = "X"
    for i in range(blocks):
        for p in "qkv":
            nodes += [helper.make_node("MatMul", [x, tensor(f"W{p}{i}", (width, width), 1 / np.sqrt(width))],
                                       [f"{p}m{i}"]),
                      helper.make_node("Add", [f"{p}m{i}", tensor(f"b{p}{i}", width, 0.1)], [f"{p}b{i}"]),
                      helper.make_node("Reshape", [f"{p}b{i}", "split"], [f"{p}s{i}"]),
                      helper.make_node("Transpose", [f"{p}s{i}"], [f"{p}{i}"],
                                       perm=[0, 2, 3, 1] if p == "k" else [0, 2, 1, 3])]
        nodes += [helper.make_node("MatMul", [f"q{i}", f"k{i}"], [f"s{i}"]),
                  helper.make_node("Mul", [f"s{i}", "scale"], [f"ss{i}"]),
                  helper.make_node("Softmax", [f"ss{i}"], [f"p{i}"], axis=-1),
                  helper.make_node("MatMul", [f"p{i}", f"v{i}"], [f"o{i}"]),
                  helper.make_node("Transpose", [f"o{i}"], [f"ot{i}"], perm=[0, 2, 1, 3]),
                  helper.make_node("Reshape", [f"ot{i}", "merge"], [f"om{i}"]),
                  helper.make_node("MatMul", [f"om{i}", tensor(f"Wo{i}", (width, width), 1 / np.sqrt(width))],
                                   [f"y{i}"]),
                  helper.make_node("Add", [f"y{i}", x], [f"r{i}"])]
        x = f"r{i}"
    nodes.append(helper.make_node("Identity", [x], ["Y"]))
    graph = helper.make_graph(nodes, "encoder", [helper.make_tensor_value_info("X", F, [batch, tokens, width])],
                              [helper.make_tensor_value_info("Y", F, [batch, tokens, width])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def check_case(name, precision):
    batch, tokens, heads, d, blocks = CASES[name]
    model = encoder_blocks(batch, tokens, heads, d, blocks)
    x = np.random.default_rng(1).standard_normal((batch, tokens, heads * d)).astype(np.float32)
    want = run_onnxruntime(model, {"X": x})["Y"]
    got, ops = run_with_profile(model, x, precision)
    assert ops.count("FusedAttention") == blocks and "Softmax" not in ops and "Transpose" not in ops, f"{name}: {ops}"
    # per block: the merged Q/K/V projection and the output projection with its residual sum
    assert ops.count("FusedMatMul") == 2 * blocks, f"{name}: {ops}"
    assert_matches_fp32_reference(got, want, precision, name, atol=1e-4 * float(np.abs(want).max()))


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", list(CASES))
def test_fused_attention_vs_onnxruntime(name, precision):
    check_case(name, precision)


def test_fused_attention_portable_path_three_threads():
    check_every_case_in_new_process("test_fused_attention", len(CASES), TF_POPEF_SIMD="portable",
                                    TF_POPEF_NUM_THREADS="3")


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("batch", [1, 8])
def test_packed_qkv_matches_three_input_form(batch, precision, monkeypatch):
    from compiler.kernel_fusion import pipeline
    model = encoder_blocks(batch, 128, 4, 64, 1)
    x = np.random.default_rng(2).standard_normal((batch, 128, 256)).astype(np.float32)
    want = run_onnxruntime(model, {"X": x})["Y"]
    packed, packed_ops = run_with_profile(model, x, precision)
    monkeypatch.setattr(pipeline, "KERNEL_FUSION_PIPELINE",
                        [p for p in pipeline.KERNEL_FUSION_PIPELINE if p != "merge_qkv_projections"])
    three, three_ops = run_with_profile(model, x, precision)
    assert packed_ops.count("FusedMatMul") == 2 and three_ops.count("FusedMatMul") == 4, (packed_ops, three_ops)
    scale = float(np.abs(want).max())
    assert_matches_fp32_reference(packed, want, precision, "packed", atol=1e-4 * scale)
    # the same products summed in another order: float32 rounding, or float16's one rounding of Q/K/V
    np.testing.assert_allclose(packed, three, rtol=0, atol=(1e-5 if precision == "fp32" else 2e-2) * scale)
