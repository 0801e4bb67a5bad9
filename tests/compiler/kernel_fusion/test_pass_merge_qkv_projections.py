"""merge_qkv_projections: self-attention's three Q/K/V projections (bias-only FusedMatMuls on
the same input, reached through views) -> one FusedMatMul over [Wq | Wk | Wv] whose output the
FusedAttention reads with qkv_widths. Each case runs the kernel fusion stage and checks the
graph, then compiles the original model (the compile step runs the fusions) and compares the
emulator with onnxruntime on the unfused model in fp32 and fp16; patterns that do not match
exactly (cross-attention, a projection without bias next to ones with, an activation, a
projection read elsewhere) keep three projections and still match."""
import numpy as np
import pytest
from onnx import helper, numpy_helper

from compiler.onnx_graph.internal_ops import DOMAIN
from compiler_test_helpers import F32, check_kernel_fusion_numerics, make_model, random_feeds


def self_attention_model(batch=2, tokens=5, heads=2, d=4, dv=None, model_dim=6, flat_input=False, memory=False,
                         q_bias=True, v_activation=False, k_read_elsewhere=False):
    """X [B, S, D] -> Q/K/V projections (MatMul + bias Add; flat_input: on X viewed [B·S, D], as
    tf2onnx writes some Dense layers) -> heads -> softmax(Q·Kᵀ/√d)·V -> output projection -> Y."""
    dv = dv or d
    rng = np.random.default_rng(heads * 10 + tokens)
    n = helper.make_node
    inits = {"Wq": rng.standard_normal((model_dim, heads * d)).astype(np.float32) / 2,
             "Wk": rng.standard_normal((model_dim, heads * d)).astype(np.float32) / 2,
             "Wv": rng.standard_normal((model_dim, heads * dv)).astype(np.float32) / 2,
             "Wo": rng.standard_normal((heads * dv, model_dim)).astype(np.float32) / 2,
             "bq": rng.standard_normal(heads * d).astype(np.float32),
             "bk": rng.standard_normal(heads * d).astype(np.float32),
             "bv": rng.standard_normal(heads * dv).astype(np.float32),
             "flat": np.asarray([batch * tokens, model_dim], np.int64),
             "q_split": np.asarray([batch, tokens, heads, d], np.int64),
             "v_split": np.asarray([batch, tokens, heads, dv], np.int64),
             "merge": np.asarray([batch, tokens, heads * dv], np.int64),
             "s": np.float32(1.0 / np.sqrt(d))}
    nodes = []
    x = "X"
    if flat_input:
        nodes.append(n("Reshape", ["X", "flat"], ["xf"]))
        x = "xf"
    sources = {"q": x, "k": "M" if memory else x, "v": x}
    for p, split, perm in (("q", "q_split", [0, 2, 1, 3]), ("k", "q_split", [0, 2, 3, 1]),
                           ("v", "v_split", [0, 2, 1, 3])):
        nodes.append(n("MatMul", [sources[p], f"W{p}"], [f"{p}0"]))
        out = f"{p}0"
        if p != "q" or q_bias:
            nodes.append(n("Add", [out, f"b{p}"], [f"{p}1"]))
            out = f"{p}1"
        if p == "v" and v_activation:
            nodes.append(n("Relu", [out], ["v2"]))
            out = "v2"
        nodes += [n("Reshape", [out, split], [f"{p}s"]), n("Transpose", [f"{p}s"], [p], perm=perm)]
    nodes += [n("MatMul", ["q", "k"], ["scores"]), n("Mul", ["scores", "s"], ["scaled"]),
              n("Softmax", ["scaled"], ["p"], axis=-1), n("MatMul", ["p", "v"], ["o"]),
              n("Transpose", ["o"], ["o1"], perm=[0, 2, 1, 3]), n("Reshape", ["o1", "merge"], ["o2"]),
              n("MatMul", ["o2", "Wo"], ["Y"])]
    inputs = [("X", F32, [batch, tokens, model_dim])]
    if memory:
        inputs.append(("M", F32, [batch, tokens, model_dim]))
    outputs = [("Y", F32, [batch, tokens, model_dim])]
    if k_read_elsewhere:
        outputs.append(("k1", F32, [batch * tokens, heads * d] if flat_input else [batch, tokens, heads * d]))
    return make_model(nodes, inputs, outputs, inits, opset=17)


def _fused(model):
    from compiler.kernel_fusion import run_kernel_fusions
    return run_kernel_fusions(model)


def _nodes(model, op):
    return [n for n in model.graph.node if n.domain == DOMAIN and n.op_type == op]


def _attrs(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


@pytest.mark.parametrize("batch,heads,d,dv,flat_input", [(1, 2, 4, 4, False), (2, 3, 4, 5, False),
                                                         (2, 2, 4, 4, True)])
def test_three_projections_become_one_gemm(batch, heads, d, dv, flat_input):
    model = self_attention_model(batch=batch, heads=heads, d=d, dv=dv, flat_input=flat_input)
    fused = _fused(model)
    attention, = _nodes(fused, "FusedAttention")
    assert _attrs(attention)["qkv_widths"] == [heads * d, heads * d, heads * dv]
    assert len(attention.input) == 1
    projections = [n for n in _nodes(fused, "FusedMatMul") if n.input[0] in ("X", "xf")]
    assert len(projections) == 1, [n.input for n in _nodes(fused, "FusedMatMul")]
    gemm, = projections
    weights = {t.name: numpy_helper.to_array(t) for t in fused.graph.initializer}
    w, b = weights[gemm.input[1]], weights[gemm.input[2]]
    assert w.shape == (6, heads * (2 * d + dv)) and b.shape == (heads * (2 * d + dv),)
    # The fold of 1/√d into Wq (fold_scale_into_matmul) comes first; K and V are the originals.
    original = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    np.testing.assert_array_equal(w[:, heads * d:], np.concatenate([original["Wk"], original["Wv"]], axis=1))
    np.testing.assert_array_equal(b[heads * d:], np.concatenate([original["bk"], original["bv"]]))
    assert not {"Wk", "Wv"} & set(weights)  # the originals are gone
    if flat_input:  # the [B·S, 3N] product is viewed [B, S, 3N]
        view = next(n for n in fused.graph.node if n.output[0] == attention.input[0])
        assert view.op_type == "Reshape" and view.input[0] == gemm.output[0]
    else:
        assert attention.input[0] == gemm.output[0]
    check_kernel_fusion_numerics(model, random_feeds(model))


def test_fp16_model_keeps_fp16_weights():
    from compiler.converter import Converter
    half = Converter(precision="fp16").convert(self_attention_model())
    fused = _fused(half)
    attention, = _nodes(fused, "FusedAttention")
    gemm = next(n for n in fused.graph.node if n.output[0] == attention.input[0])
    weights = {t.name: numpy_helper.to_array(t) for t in fused.graph.initializer}
    assert gemm.op_type == "FusedMatMul"
    assert weights[gemm.input[1]].dtype == np.float16 and weights[gemm.input[2]].dtype == np.float16


@pytest.mark.parametrize("case", ["cross_attention", "q_without_bias", "v_activation", "k_read_elsewhere"])
def test_what_does_not_match_keeps_three_projections(case):
    model = self_attention_model(memory=case == "cross_attention", q_bias=case != "q_without_bias",
                                 v_activation=case == "v_activation", k_read_elsewhere=case == "k_read_elsewhere")
    fused = _fused(model)
    attention, = _nodes(fused, "FusedAttention")
    assert "qkv_widths" not in _attrs(attention) and len(attention.input) == 3
    check_kernel_fusion_numerics(model, random_feeds(model))


@pytest.mark.parametrize("widths,match", [
    ([8, 8, 4], r"node 'Y' \(FusedAttention\): QKV \[1, 3, 24\] and qkv_widths \[8, 8, 4\] do not make "
                r"\[B, S, wq \+ wk \+ wv\]"),
    ([8, 16], r"QKV \[1, 3, 24\] and qkv_widths \[8, 16\]"),
    ([8, 4, 12], r"Q \[1, 3, 8\], K \[1, 3, 4\], V \[1, 3, 12\] do not make"),
])
def test_lowering_names_the_node_for_bad_qkv_widths(widths, match):
    from compiler.errors import LoweringError
    from compiler.lowering.lower_graph import lower_graph
    from compiler.lowering.weights import WeightStore
    from compiler.onnx_graph.internal_ops import VERSION
    node = helper.make_node("FusedAttention", ["QKV"], ["Y"], name="Y", domain=DOMAIN, num_heads=2, qkv_widths=widths)
    model = make_model([node], [("QKV", F32, [1, 3, 24])], [("Y", F32, [1, 3, widths[-1]])])
    model.opset_import.append(helper.make_opsetid(DOMAIN, VERSION))
    with pytest.raises(LoweringError, match=match):
        lower_graph(model, WeightStore(), "test.onnx")
