"""fuse_attention: per-head attention (head Reshape/Transposes, Q·Kᵀ, scale, Softmax, ·V,
Transpose back) -> one FusedAttention reading the projections' [B, S, H·d] outputs. Each case
checks the graph after the pass, then compiles the original model (the compile step runs the
fusions) and compares the emulator with onnxruntime on the unfused model, fp32 and fp16; patterns
the op does not compute (an attention mask, heads interleaved along the features, a tensor read
elsewhere) stay unfused and still match. The Keras MultiHeadAttention export is checked at the
end."""
import numpy as np
import pytest
from onnx import helper

from compiler.onnx_graph.internal_ops import DOMAIN
from compiler_test_helpers import F32, check_kernel_fusion_numerics, make_model, op_types, random_feeds, run_pass


def mha_model(batch=2, q_len=5, kv_len=None, heads=2, d=4, dv=None, scale_op="Mul", mask=False,
              interleaved_heads=False, extra_output=None, softmax_rows=None):
    """X [B, Sq, D] (and M [B, Skv, D] for cross-attention) -> Q/K/V projections -> heads ->
    softmax(scale·Q·Kᵀ [+ mask])·V -> [B, Sq, H·dv] -> output projection -> Y."""
    kv_len = kv_len or q_len
    dv = dv or d
    model_dim = 6
    rng = np.random.default_rng(heads * 100 + q_len)
    n = helper.make_node
    inits = {"Wq": rng.standard_normal((model_dim, heads * d)).astype(np.float32),
             "Wk": rng.standard_normal((model_dim, heads * d)).astype(np.float32),
             "Wv": rng.standard_normal((model_dim, heads * dv)).astype(np.float32),
             "Wo": rng.standard_normal((heads * dv, model_dim)).astype(np.float32),
             "bq": rng.standard_normal(heads * d).astype(np.float32),
             "q_split": np.asarray([batch, q_len, heads, d] if not interleaved_heads else [batch, q_len, d, heads],
                                   np.int64),
             "k_split": np.asarray([batch, kv_len, heads, d], np.int64),
             "v_split": np.asarray([batch, kv_len, heads, dv], np.int64),
             "merge": np.asarray([batch, q_len, heads * dv], np.int64),
             "s": np.float32(1.0 / np.sqrt(d) if scale_op == "Mul" else np.sqrt(d))}
    memory = "M" if kv_len != q_len else "X"
    q_perm = [0, 2, 1, 3] if not interleaved_heads else [0, 3, 1, 2]
    nodes = [n("MatMul", ["X", "Wq"], ["q0"]), n("Add", ["q0", "bq"], ["q1"]), n("Reshape", ["q1", "q_split"], ["q2"]),
             n("Transpose", ["q2"], ["q"], perm=q_perm),
             n("MatMul", [memory, "Wk"], ["k0"]), n("Reshape", ["k0", "k_split"], ["k1"]),
             n("Transpose", ["k1"], ["kt"], perm=[0, 2, 3, 1]),
             n("MatMul", [memory, "Wv"], ["v0"]), n("Reshape", ["v0", "v_split"], ["v1"]),
             n("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3]),
             n("MatMul", ["q", "kt"], ["scores"])]
    scores = "scores"
    if scale_op:
        nodes.append(n(scale_op, ["scores", "s"], ["scaled"]))
        scores = "scaled"
    if mask:
        inits["mask"] = np.where(rng.random((batch, 1, 1, kv_len)) < 0.3, -1e4, 0.0).astype(np.float32)
        nodes.append(n("Add", [scores, "mask"], ["masked"]))
        scores = "masked"
    if softmax_rows:  # the softmax over rows of another length, viewed back
        inits["rows"] = np.asarray([-1, softmax_rows], np.int64)
        inits["scores_shape"] = np.asarray([batch, heads, q_len, kv_len], np.int64)
        nodes += [n("Reshape", [scores, "rows"], ["rows_in"]), n("Softmax", ["rows_in"], ["rows_out"], axis=-1),
                  n("Reshape", ["rows_out", "scores_shape"], ["p"])]
    else:
        nodes.append(n("Softmax", [scores], ["p"], axis=-1))
    nodes += [n("MatMul", ["p", "v"], ["o"]),
              n("Transpose", ["o"], ["o1"], perm=[0, 2, 1, 3]), n("Reshape", ["o1", "merge"], ["o2"]),
              n("MatMul", ["o2", "Wo"], ["Y"])]
    inputs = [("X", F32, [batch, q_len, model_dim])] + ([("M", F32, [batch, kv_len, model_dim])]
                                                          if memory == "M" else [])
    outputs = [("Y", F32, [batch, q_len, model_dim])]
    if extra_output == "p":
        outputs.append(("p", F32, [batch, heads, q_len, kv_len]))
    return make_model(nodes, inputs, outputs, inits, opset=17)


def _attention_nodes(model):
    return [(n, {a.name: helper.get_attribute_value(a) for a in n.attribute})
            for n in model.graph.node if n.domain == DOMAIN and n.op_type == "FusedAttention"]


@pytest.mark.parametrize("batch,heads,scale_op", [(1, 1, "Mul"), (2, 2, "Mul"), (1, 4, "Div"), (3, 2, None)])
def test_self_attention_becomes_one_fused_attention(batch, heads, scale_op):
    model = mha_model(batch=batch, heads=heads, scale_op=scale_op)
    fused = run_pass(model, "fuse_attention")
    (node, attrs), = _attention_nodes(fused)
    assert attrs["num_heads"] == heads
    want_scale = {"Mul": 0.5, "Div": 0.5, None: None}[scale_op]
    assert attrs.get("scale") == (pytest.approx(want_scale) if want_scale else None)
    assert list(node.input) == ["q1", "k0", "v0"] and list(node.output) == ["o2"]
    assert op_types(fused) == ["MatMul", "Add", "MatMul", "MatMul", "FusedAttention", "MatMul"]
    check_kernel_fusion_numerics(model, random_feeds(model))


def test_cross_attention_with_other_value_size():
    model = mha_model(batch=2, q_len=3, kv_len=7, heads=3, d=4, dv=5)
    fused = run_pass(model, "fuse_attention")
    (node, attrs), = _attention_nodes(fused)
    assert attrs["num_heads"] == 3 and list(node.input) == ["q1", "k0", "v0"]
    check_kernel_fusion_numerics(model, random_feeds(model))


def test_the_compile_step_fuses_after_the_scale_is_folded():
    from compiler.kernel_fusion import run_kernel_fusions
    model = mha_model(batch=1, heads=2)
    fused = run_kernel_fusions(model)
    (_, attrs), = _attention_nodes(fused)
    assert "scale" not in attrs  # fold_scale_into_matmul moved it into Wq
    assert "Transpose" not in op_types(fused) and "Softmax" not in op_types(fused)


@pytest.mark.parametrize("case", ["mask", "interleaved_heads", "probabilities_read_elsewhere", "softmax_rows"])
def test_what_the_op_does_not_compute_stays_unfused(case):
    model = mha_model(mask=case == "mask", interleaved_heads=case == "interleaved_heads",
                      extra_output="p" if case == "probabilities_read_elsewhere" else None,
                      softmax_rows=10 if case == "softmax_rows" else None)
    fused = run_pass(model, "fuse_attention")
    assert not _attention_nodes(fused) and "Softmax" in op_types(fused)
    if case != "probabilities_read_elsewhere":
        check_kernel_fusion_numerics(model, random_feeds(model))


def test_keras_multi_head_attention_export(tmp_path):
    """Keras MultiHeadAttention (biases, tf2onnx's einsum decomposition) as tests/frontends
    exports it: one FusedAttention, no Transpose or Softmax left, and the emulator matches
    onnxruntime on the original graph in fp32 and fp16."""
    import keras
    from compiler.converter import Converter
    from compiler.frontends import tensorflow_to_onnx
    from compiler.kernel_fusion import run_kernel_fusions
    from compiler_test_helpers import ort_run
    from compiler import Compiler
    from tf_popef_op.runtime import ModelRunner, RuntimeConfig
    keras.utils.set_random_seed(0)
    x = keras.Input((8, 16))
    path = str(tmp_path / "m")
    keras.Model(x, keras.layers.MultiHeadAttention(num_heads=2, key_dim=8)(x, x)).export(path, verbose=False)
    onnx_model = tensorflow_to_onnx(path)
    converted = Converter(batch_size=2).convert(onnx_model)
    fused = run_kernel_fusions(converted)
    (_, attrs), = _attention_nodes(fused)
    assert attrs["num_heads"] == 2
    assert "Transpose" not in op_types(fused) and "Softmax" not in op_types(fused)
    name = converted.graph.input[0].name
    sample = np.random.default_rng(0).standard_normal((2, 8, 16)).astype(np.float32)
    (want,) = ort_run(converted, {name: sample})
    got = list(ModelRunner(Compiler.compile(converted), RuntimeConfig()).execute({name: sample}).values())[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
    half = Converter(batch_size=2, precision="fp16").convert(onnx_model)
    assert _attention_nodes(run_kernel_fusions(half))
    got16 = list(ModelRunner(Compiler.compile(half), RuntimeConfig()).execute(
        {name: sample.astype(np.float16)}).values())[0].astype(np.float32)
    np.testing.assert_allclose(got16, want, rtol=2e-2, atol=2e-2 * float(np.abs(want).max()))
