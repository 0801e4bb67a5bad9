"""fuse_layernorm_into_matmul: a LayerNormalization over the last axis whose only reader is a
constant-weight (Fused)MatMul becomes its prologue (FusedMatMul with normalize_epsilon, the scale
folded into the weights and the shift into the bias). Each case checks the graph after the
passes, and the fused cases the emulator against onnxruntime on the original model in fp32 and
fp16, with the packed GEMM and with OpenBLAS (which normalizes A into scratch)."""
import numpy as np
import pytest
from onnx import helper

from compiler.kernel_fusion import run_kernel_fusions
from compiler.onnx_graph.internal_ops import DOMAIN
from compiler_test_helpers import F32, check_kernel_fusion_numerics, make_model, op_types, random_feeds, run_pass
from test_pass_channels_last_stream import convnext_model
from test_pass_to_nchwc_layout import counts

PASSES = ["constant_folding", "fuse_epilogue", "fuse_layernorm_into_matmul"]
K, N = 24, 40


def ln_dense_model(x_shape=(2, 5, K), scale_shape=(K,), shift=True, bias=True, activation="Gelu", residual=False,
                   axis=-1, epsilon=1e-6, opset=20, seed=0):
    """X -> LayerNormalization(γ, β) -> MatMul(W) [-> Add(b)] [-> Add(R)] [-> activation] -> Y."""
    rng = np.random.default_rng(seed)
    y_shape = list(x_shape[:-1]) + [N]
    inits = {"gamma": rng.uniform(0.5, 1.5, scale_shape).astype(np.float32),
             "W": (rng.standard_normal((K, N)) / np.sqrt(K)).astype(np.float32)}
    ln_inputs = ["X", "gamma"]
    if shift:
        inits["beta"] = (0.3 * rng.standard_normal(scale_shape)).astype(np.float32)
        ln_inputs.append("beta")
    n = helper.make_node
    nodes = [n("LayerNormalization", ln_inputs, ["L"], axis=axis, epsilon=epsilon, name="ln"),
             n("MatMul", ["L", "W"], ["P"], name="dense")]
    cur = "P"
    if bias:
        inits["b"] = (0.1 * rng.standard_normal(N)).astype(np.float32)
        nodes.append(n("Add", [cur, "b"], ["PB"]))
        cur = "PB"
    inputs = [("X", F32, list(x_shape))]
    if residual:
        inputs.append(("R", F32, y_shape))
        nodes.append(n("Add", [cur, "R"], ["PS"]))
        cur = "PS"
    if activation:
        nodes.append(n(activation, [cur], ["PA"]))
        cur = "PA"
    nodes.append(n("Identity", [cur], ["Y"]))
    return make_model(nodes, inputs, [("Y", F32, y_shape)], inits, opset=opset)


def _feeds(model, seed=0):
    """Rows with a mean well away from 0 and a spread that differs per row."""
    feeds = random_feeds(model, seed)
    x = feeds["X"]
    rows = np.random.default_rng(seed + 1).uniform(0.2, 3.0, x.shape[:-1] + (1,))
    feeds["X"] = (3.0 + rows * x).astype(np.float32)
    return feeds


def _attrs(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _check_numerics(model, monkeypatch):
    for gemm in ("packed", "blas"):
        monkeypatch.setenv("TF_POPEF_GEMM", gemm)
        check_kernel_fusion_numerics(model, _feeds(model))


@pytest.mark.parametrize("shift,bias,activation,residual", [
    (True, True, "Gelu", False), (True, False, "", False), (False, True, "Relu", True), (True, True, "", True)])
def test_layernorm_becomes_the_prologue_of_one_fused_matmul(shift, bias, activation, residual, monkeypatch):
    model = ln_dense_model(shift=shift, bias=bias, activation=activation, residual=residual)
    fused = run_pass(model, ["eliminate_identity"] + PASSES)
    assert op_types(fused) == ["FusedMatMul"], op_types(fused)
    node = fused.graph.node[0]
    attrs = _attrs(node)
    assert node.domain == DOMAIN and node.input[0] == "X"
    assert attrs["normalize_epsilon"] == pytest.approx(1e-6)
    assert (len(node.input) > 2 and node.input[2] != "") == (shift or bias)  # a zero shift adds no bias
    assert (len(node.input) > 3 and node.input[3] != "") == residual
    _check_numerics(model, monkeypatch)


@pytest.mark.parametrize("scale_shape", [(K,), (1,)])
def test_broadcast_scale_and_two_dimensional_input(scale_shape, monkeypatch):
    model = ln_dense_model(x_shape=(9, K), scale_shape=scale_shape, activation="", epsilon=1e-5)
    fused = run_pass(model, ["eliminate_identity"] + PASSES)
    assert op_types(fused) == ["FusedMatMul"]
    _check_numerics(model, monkeypatch)


def test_pipeline_takes_convnext_blocks_layernorms():
    """Each block's LayerNorm feeds only its first Dense: 4 of the 6 go (the stem's and the
    downsampling's feed convolutions)."""
    fused = run_kernel_fusions(convnext_model(), "convnext.onnx")
    prologues = [n for n in fused.graph.node if n.op_type == "FusedMatMul" and "normalize_epsilon" in _attrs(n)]
    assert len(prologues) == 4 and counts(fused)["LayerNormalization"] == 2


# --- what must not be fused --------------------------------------------------------------------
def test_layernorm_read_twice_stays():
    """BERT's post-LN: the output feeds the next MatMul and the residual Add."""
    n = helper.make_node
    nodes = [n("LayerNormalization", ["X", "gamma"], ["L"], axis=-1), n("MatMul", ["L", "W"], ["P"]),
             n("Add", ["P", "L"], ["Y"])]
    model = make_model(nodes, [("X", F32, [3, K])], [("Y", F32, [3, K])],
                       {"gamma": np.ones(K, np.float32), "W": np.ones((K, K), np.float32)}, opset=17)
    assert "LayerNormalization" in op_types(run_pass(model, PASSES))


def test_layernorm_over_more_than_the_last_axis_stays():
    model = ln_dense_model(scale_shape=(5, K), axis=1, activation="")
    assert "LayerNormalization" in op_types(run_pass(model, PASSES))


def test_layernorm_output_that_is_a_graph_output_stays():
    model = ln_dense_model(activation="")
    model.graph.output.append(helper.make_tensor_value_info("L", F32, [2, 5, K]))
    assert "LayerNormalization" in op_types(run_pass(model, PASSES))


def test_layernorm_as_the_weights_side_stays():
    n = helper.make_node
    nodes = [n("LayerNormalization", ["X", "gamma"], ["L"], axis=-1), n("MatMul", ["A", "L"], ["Y"])]
    model = make_model(nodes, [("X", F32, [K, N]), ("A", F32, [3, K])], [("Y", F32, [3, N])],
                       {"gamma": np.ones(N, np.float32)}, opset=17)
    assert op_types(run_pass(model, PASSES)) == ["LayerNormalization", "MatMul"]


def test_runtime_scale_stays():
    n = helper.make_node
    nodes = [n("LayerNormalization", ["X", "G"], ["L"], axis=-1), n("MatMul", ["L", "W"], ["Y"])]
    model = make_model(nodes, [("X", F32, [3, K]), ("G", F32, [K])], [("Y", F32, [3, N])],
                       {"W": np.ones((K, N), np.float32)}, opset=17)
    assert op_types(run_pass(model, PASSES)) == ["LayerNormalization", "MatMul"]
