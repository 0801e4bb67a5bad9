"""The packed GEMM (tf_popef_op/runtime/cc/kernels/matmul/packed_gemm.h) in a small transformer
encoder block against onnxruntime: the dense layers (fused QKV projection with its bias,
attention output + bias + residual, the feed-forward pair with Gelu) with their weights packed
once, attention's batched products of two activations (scores, context) packed per run; and a
ConvNeXt-style pointwise pair on an NHWC activation (K = 96 up, which takes the packed GEMM by
default in both precisions; K = 1536 down: three K blocks, accumulated in C); a ConvNeXt-style
block (LayerNorm, the pointwise pair, the layer scale folded into the second Dense and the
residual in its epilogue) and a ViT-style pre-LN MLP block.
float32 and float16, packed and OpenBLAS (TF_POPEF_GEMM, read at prepare), and the portable and
AVX2 paths at 1 pool thread in new processes (TF_POPEF_SIMD and TF_POPEF_NUM_THREADS are read
once per process)."""
import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from e2e_helpers import compile_and_run, run_in_new_process, run_onnxruntime

F = TensorProto.FLOAT
BATCH, SEQ, HIDDEN, HEADS, FFN = 2, 37, 64, 4, 136  # 74 rows: partial row tiles; 136: partial panels


def encoder_block(seed=0):
    """x + Attention(x) -> LayerNorm -> + FFN (Gelu) -> LayerNorm, ONNX opset 20 (Gelu)."""
    rng = np.random.default_rng(seed)
    head = HIDDEN // HEADS

    def weight(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32), name)

    def vector(name, n, scale=0.1, offset=0.0):
        return numpy_helper.from_array((offset + scale * rng.standard_normal(n)).astype(np.float32), name)

    inits = [weight("Wqkv", HIDDEN, 3 * HIDDEN), vector("Bqkv", 3 * HIDDEN), weight("Wo", HIDDEN, HIDDEN),
             vector("Bo", HIDDEN), weight("W1", HIDDEN, FFN), vector("B1", FFN), weight("W2", FFN, HIDDEN),
             vector("B2", HIDDEN), vector("G1", HIDDEN, offset=1.0), vector("Be1", HIDDEN),
             vector("G2", HIDDEN, offset=1.0), vector("Be2", HIDDEN),
             numpy_helper.from_array(np.array([BATCH, SEQ, 3, HEADS, head], np.int64), "qkv_shape"),
             numpy_helper.from_array(np.array([BATCH, SEQ, HIDDEN], np.int64), "out_shape"),
             numpy_helper.from_array(np.array(1.0 / np.sqrt(head), np.float32), "scale")]
    n = helper.make_node
    nodes = [
        n("MatMul", ["X", "Wqkv"], ["qkv_mm"]), n("Add", ["qkv_mm", "Bqkv"], ["qkv"]),
        n("Reshape", ["qkv", "qkv_shape"], ["qkv5"]),
        n("Transpose", ["qkv5"], ["qkvT"], perm=[2, 0, 3, 1, 4]),  # [3, B, heads, S, head]
        n("Split", ["qkvT"], ["q1", "k1", "v1"], axis=0, num_outputs=3),
        n("Squeeze", ["q1", "zero"], ["q"]), n("Squeeze", ["k1", "zero"], ["k"]), n("Squeeze", ["v1", "zero"], ["v"]),
        n("Transpose", ["k"], ["kT"], perm=[0, 1, 3, 2]),
        n("MatMul", ["q", "kT"], ["scores_raw"]), n("Mul", ["scores_raw", "scale"], ["scores"]),
        n("Softmax", ["scores"], ["probs"], axis=-1),
        n("MatMul", ["probs", "v"], ["ctx4"]),
        n("Transpose", ["ctx4"], ["ctxT"], perm=[0, 2, 1, 3]), n("Reshape", ["ctxT", "out_shape"], ["ctx"]),
        n("MatMul", ["ctx", "Wo"], ["attn_mm"]), n("Add", ["attn_mm", "Bo"], ["attn"]),
        n("Add", ["attn", "X"], ["res1"]),
        n("LayerNormalization", ["res1", "G1", "Be1"], ["ln1"], axis=-1, epsilon=1e-5),
        n("MatMul", ["ln1", "W1"], ["ff1_mm"]), n("Add", ["ff1_mm", "B1"], ["ff1"]), n("Gelu", ["ff1"], ["gelu"]),
        n("MatMul", ["gelu", "W2"], ["ff2_mm"]), n("Add", ["ff2_mm", "B2"], ["ff2"]),
        n("Add", ["ff2", "ln1"], ["res2"]),
        n("LayerNormalization", ["res2", "G2", "Be2"], ["Y"], axis=-1, epsilon=1e-5),
    ]
    inits.append(numpy_helper.from_array(np.array([0], np.int64), "zero"))
    graph = helper.make_graph(nodes, "encoder_block", [helper.make_tensor_value_info("X", F, [BATCH, SEQ, HIDDEN])],
                              [helper.make_tensor_value_info("Y", F, [BATCH, SEQ, HIDDEN])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


TOLERANCE = {"fp32": dict(rtol=1e-4, atol=1e-4), "fp16": dict(rtol=2e-2, atol=2e-2)}


def _feeds():
    return {"X": np.random.default_rng(1).standard_normal((BATCH, SEQ, HIDDEN)).astype(np.float32)}


POINTWISE_SHAPE, POINTWISE_IN, POINTWISE_HIDDEN, POINTWISE_OUT = (2, 5, 7, 96), 96, 1536, 200


def pointwise_pair(seed=0):
    """X[N, H, W, 96] -> MatMul 96x1536 + bias -> Gelu -> MatMul 1536x200 + bias, opset 20."""
    rng = np.random.default_rng(seed)

    def init(name, *shape, scale=1.0):
        return numpy_helper.from_array((scale * rng.standard_normal(shape)).astype(np.float32), name)

    inits = [init("W1", POINTWISE_IN, POINTWISE_HIDDEN, scale=POINTWISE_IN ** -0.5),
             init("B1", POINTWISE_HIDDEN, scale=0.1),
             init("W2", POINTWISE_HIDDEN, POINTWISE_OUT, scale=POINTWISE_HIDDEN ** -0.5),
             init("B2", POINTWISE_OUT, scale=0.1)]
    n = helper.make_node
    nodes = [n("MatMul", ["X", "W1"], ["up_mm"]), n("Add", ["up_mm", "B1"], ["up"]), n("Gelu", ["up"], ["gelu"]),
             n("MatMul", ["gelu", "W2"], ["down_mm"]), n("Add", ["down_mm", "B2"], ["Y"])]
    graph = helper.make_graph(nodes, "pointwise_pair", [helper.make_tensor_value_info("X", F, POINTWISE_SHAPE)],
                              [helper.make_tensor_value_info("Y", F, (*POINTWISE_SHAPE[:3], POINTWISE_OUT))], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("gemm", ["packed", "blas"])
def test_encoder_block_vs_onnxruntime(monkeypatch, precision, gemm):
    monkeypatch.setenv("TF_POPEF_GEMM", gemm)
    model = encoder_block()
    want = run_onnxruntime(model, _feeds())["Y"]
    got = compile_and_run(model, _feeds(), precision=precision)["Y"].astype(np.float32)
    np.testing.assert_allclose(got, want, **TOLERANCE[precision])


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("gemm", ["auto", "packed", "blas"])
def test_pointwise_pair_vs_onnxruntime(monkeypatch, precision, gemm):
    monkeypatch.setenv("TF_POPEF_GEMM", gemm)
    model = pointwise_pair()
    feeds = {"X": np.random.default_rng(2).standard_normal(POINTWISE_SHAPE).astype(np.float32)}
    want = run_onnxruntime(model, feeds)["Y"]
    got = compile_and_run(model, feeds, precision=precision)["Y"].astype(np.float32)
    np.testing.assert_allclose(got, want, **TOLERANCE[precision])


CONVNEXT_SHAPE, CONVNEXT_C = (2, 7, 9, 96), 96  # NHWC; 126 rows: partial row tiles


def _init(rng, name, *shape, scale=1.0, offset=0.0):
    return numpy_helper.from_array((offset + scale * rng.standard_normal(shape)).astype(np.float32), name)


def convnext_block(seed=0):
    """ConvNeXt's pointwise half on an NHWC X: LayerNorm over the channels -> Dense 96->384 +
    Gelu -> Dense 384->96 + bias -> layer scale (x·γ) -> + X, opset 20. The layer scale goes
    into the second Dense's weights and bias, the residual into its epilogue."""
    rng = np.random.default_rng(seed)
    c, h = CONVNEXT_C, 4 * CONVNEXT_C
    inits = [_init(rng, "G", c, scale=0.2, offset=1.0), _init(rng, "Be", c, scale=0.2),
             _init(rng, "W1", c, h, scale=c ** -0.5), _init(rng, "B1", h, scale=0.1),
             _init(rng, "W2", h, c, scale=h ** -0.5), _init(rng, "B2", c, scale=0.1),
             _init(rng, "Gamma", c, scale=0.3, offset=0.5)]
    n = helper.make_node
    nodes = [n("LayerNormalization", ["X", "G", "Be"], ["ln"], axis=-1, epsilon=1e-6),
             n("MatMul", ["ln", "W1"], ["up_mm"]), n("Add", ["up_mm", "B1"], ["up"]), n("Gelu", ["up"], ["gelu"]),
             n("MatMul", ["gelu", "W2"], ["down_mm"]), n("Add", ["down_mm", "B2"], ["down"]),
             n("Mul", ["down", "Gamma"], ["scaled"]), n("Add", ["X", "scaled"], ["Y"])]
    graph = helper.make_graph(nodes, "convnext_block", [helper.make_tensor_value_info("X", F, CONVNEXT_SHAPE)],
                              [helper.make_tensor_value_info("Y", F, CONVNEXT_SHAPE)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def vit_mlp_block(seed=0):
    """ViT's pre-LN MLP half: X + Dense(Gelu(Dense(LayerNorm(X)))), X [BATCH, SEQ, HIDDEN]."""
    rng = np.random.default_rng(seed)
    inits = [_init(rng, "G", HIDDEN, scale=0.2, offset=1.0), _init(rng, "Be", HIDDEN, scale=0.2),
             _init(rng, "W1", HIDDEN, FFN, scale=HIDDEN ** -0.5), _init(rng, "B1", FFN, scale=0.1),
             _init(rng, "W2", FFN, HIDDEN, scale=FFN ** -0.5), _init(rng, "B2", HIDDEN, scale=0.1)]
    n = helper.make_node
    nodes = [n("LayerNormalization", ["X", "G", "Be"], ["ln"], axis=-1, epsilon=1e-6),
             n("MatMul", ["ln", "W1"], ["up_mm"]), n("Add", ["up_mm", "B1"], ["up"]), n("Gelu", ["up"], ["gelu"]),
             n("MatMul", ["gelu", "W2"], ["down_mm"]), n("Add", ["down_mm", "B2"], ["down"]),
             n("Add", ["X", "down"], ["Y"])]
    graph = helper.make_graph(nodes, "vit_mlp_block", [helper.make_tensor_value_info("X", F, [BATCH, SEQ, HIDDEN])],
                              [helper.make_tensor_value_info("Y", F, [BATCH, SEQ, HIDDEN])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("gemm", ["auto", "blas"])
@pytest.mark.parametrize("block", ["convnext", "vit_mlp"])
def test_dense_blocks_vs_onnxruntime(monkeypatch, precision, gemm, block):
    """Rows with a mean away from 0 and different spreads, as the LayerNorm sees them."""
    monkeypatch.setenv("TF_POPEF_GEMM", gemm)
    model = convnext_block() if block == "convnext" else vit_mlp_block()
    shape = CONVNEXT_SHAPE if block == "convnext" else (BATCH, SEQ, HIDDEN)
    rng = np.random.default_rng(3)
    feeds = {"X": (2.0 + rng.uniform(0.3, 3.0, shape[:-1] + (1,)) * rng.standard_normal(shape)).astype(np.float32)}
    want = run_onnxruntime(model, feeds)["Y"]
    got = compile_and_run(model, feeds, precision=precision)["Y"].astype(np.float32)
    tol = TOLERANCE[precision]
    np.testing.assert_allclose(got, want, rtol=tol["rtol"], atol=tol["atol"] * float(np.abs(want).max()))


@pytest.mark.parametrize("simd", ["portable", "avx2"])
def test_encoder_block_other_simd_paths_one_thread(simd):
    """The default path (AVX-512 on the CI machines) at the default 2 threads is the test above."""
    script = """
import json
import numpy as np
from e2e_helpers import compile_and_run, run_onnxruntime
from test_packed_gemm import encoder_block, _feeds
model = encoder_block()
want = run_onnxruntime(model, _feeds())["Y"]
errors = {p: float(np.max(np.abs(compile_and_run(model, _feeds(), precision=p)["Y"].astype(np.float32) - want)))
          for p in ("fp32", "fp16")}
print(json.dumps(errors))
"""
    out = run_in_new_process(script, TF_POPEF_SIMD=simd, TF_POPEF_NUM_THREADS="1", TF_POPEF_GEMM="packed")
    errors = json.loads(out.strip().splitlines()[-1])
    assert errors["fp32"] <= 1e-4, errors
    assert errors["fp16"] <= 2e-2 * 4, errors  # rtol 2e-2 on LayerNorm outputs of magnitude up to ~4
