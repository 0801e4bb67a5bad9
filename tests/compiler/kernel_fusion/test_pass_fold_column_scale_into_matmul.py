"""fold_column_scale_into_matmul: a per-column constant Mul after a constant-weight MatMul (and its
bias Adds) goes into the weights and the bias, so fuse_epilogue makes MatMul + bias + layer scale
+ residual Add one FusedMatMul. Each case checks the graph after the passes, and the folded cases
the emulator against onnxruntime on the original model in fp32 and fp16."""
import copy

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.kernel_fusion import run_kernel_fusions
from compiler.onnx_graph.internal_ops import DOMAIN
from compiler_test_helpers import (F32, assert_same_outputs, check_kernel_fusion_numerics, make_model, op_types,
                                   random_feeds, run_pass)
from test_pass_channels_last_stream import convnext_model
from test_pass_to_nchwc_layout import counts

FOLD = "fold_column_scale_into_matmul"
FOLD_AND_FUSE = ["constant_folding", FOLD, "fuse_epilogue"]
K, N = 12, 20


def layer_scale_model(x_shape=(2, 3, 4, K), gamma_shape=(N,), bias=True, scale_first=False, residual=True,
                      gamma=None, seed=0):
    """X -> MatMul(W) -> Add(b) -> Mul(γ) -> Add(R) -> Y (scale_first: the Mul before the bias Add)."""
    rng = np.random.default_rng(seed)
    y_shape = list(x_shape[:-1]) + [N]
    inits = {"W": (rng.standard_normal((K, N)) / np.sqrt(K)).astype(np.float32),
             "b": rng.standard_normal(N).astype(np.float32),
             "g": (rng.uniform(0.3, 1.5, gamma_shape) if gamma is None else np.full(gamma_shape, gamma)
                   ).astype(np.float32)}
    n = helper.make_node
    nodes, cur = [n("MatMul", ["X", "W"], ["P"], name="dense")], "P"
    steps = [("Add", "b"), ("Mul", "g")] if bias else [("Mul", "g")]
    if scale_first:
        steps.reverse()
    for op, const in steps:
        nodes.append(n(op, [cur, const], [cur + op], name=op.lower()))
        cur = cur + op
    inputs = [("X", F32, list(x_shape))]
    if residual:
        inputs.append(("R", F32, y_shape))
        nodes.append(n("Add", ["R", cur], ["Y"], name="residual"))
    else:
        nodes.append(n("Identity", [cur], ["Y"]))
    if not bias:
        del inits["b"]
    return make_model(nodes, inputs, [("Y", F32, y_shape)], inits)


def _as_float16(model):
    """The model with float16 weights, inputs and outputs (as the kernel fusion stage sees a
    float16 model; the converter's own affine fold, which runs before float_to_half, is left out)."""
    half = copy.deepcopy(model)
    for i, t in enumerate(half.graph.initializer):
        half.graph.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16), t.name))
    for v in list(half.graph.input) + list(half.graph.output):
        v.type.tensor_type.elem_type = TensorProto.FLOAT16
    return half


def _fused_node(model):
    (node,) = [nd for nd in model.graph.node if nd.op_type == "FusedMatMul"]
    assert node.domain == DOMAIN
    return node


@pytest.mark.parametrize("gamma_shape", [(N,), (1, 1, 1, N), (1,)])
@pytest.mark.parametrize("bias,scale_first", [(True, False), (True, True), (False, False)])
def test_layer_scale_and_residual_become_one_fused_matmul(gamma_shape, bias, scale_first):
    model = layer_scale_model(gamma_shape=gamma_shape, bias=bias, scale_first=scale_first)
    folded = run_pass(model, [FOLD])
    assert "Mul" not in op_types(folded)
    assert_same_outputs(model, folded, random_feeds(model), rtol=1e-5, atol=1e-5)
    fused = run_pass(model, FOLD_AND_FUSE)
    assert op_types(fused) == ["FusedMatMul"], op_types(fused)
    node = _fused_node(fused)
    assert (node.input[2] != "") == bias and node.input[3] == "R"
    check_kernel_fusion_numerics(model, random_feeds(model))


def test_two_dimensional_dense_without_residual():
    model = layer_scale_model(x_shape=(7, K), residual=False)
    fused = run_pass(model, ["eliminate_identity"] + FOLD_AND_FUSE)
    assert op_types(fused) == ["FusedMatMul"]
    check_kernel_fusion_numerics(model, random_feeds(model))


def test_shared_weights_keep_their_original_for_the_other_reader():
    model = layer_scale_model()
    model.graph.node.append(helper.make_node("MatMul", ["X", "W"], ["Z"], name="other"))
    model.graph.output.append(helper.make_tensor_value_info("Z", F32, [2, 3, 4, N]))
    folded = run_pass(model, [FOLD])
    other = [nd for nd in folded.graph.node if nd.name == "other"][0]
    dense = [nd for nd in folded.graph.node if nd.name == "dense"][0]
    assert other.input[1] == "W" and dense.input[1] != "W"
    assert "Mul" not in op_types(folded)
    assert_same_outputs(model, folded, random_feeds(model), rtol=1e-5, atol=1e-5)


def test_replaced_weights_are_dropped():
    folded = run_pass(layer_scale_model(), [FOLD])
    names = {t.name for t in folded.graph.initializer}
    assert "W" not in names and "b" not in names and "g" in names


# --- what must not be folded -------------------------------------------------------------------
def test_scale_along_rows_is_not_a_column_scale():
    model = layer_scale_model(x_shape=(5, K), gamma_shape=(5, 1))
    assert op_types(run_pass(model, [FOLD])) == op_types(model)


def test_scale_that_broadcasts_to_more_dims_is_left_alone():
    model = layer_scale_model(x_shape=(5, K), gamma_shape=(1, 1, N))
    model.graph.output[0].type.tensor_type.shape.Clear()
    assert op_types(run_pass(model, [FOLD])) == op_types(model)


def test_runtime_scale_is_left_alone():
    n = helper.make_node
    nodes = [n("MatMul", ["X", "W"], ["P"]), n("Mul", ["P", "S"], ["Y"])]
    model = make_model(nodes, [("X", F32, [3, K]), ("S", F32, [N])], [("Y", F32, [3, N])],
                       {"W": np.ones((K, N), np.float32)})
    assert op_types(run_pass(model, [FOLD])) == ["MatMul", "Mul"]


def test_matmul_of_two_runtime_tensors_is_left_alone():
    n = helper.make_node
    nodes = [n("MatMul", ["X", "Z"], ["P"]), n("Mul", ["P", "g"], ["Y"])]
    model = make_model(nodes, [("X", F32, [3, K]), ("Z", F32, [K, N])], [("Y", F32, [3, N])],
                       {"g": np.full(N, 0.5, np.float32)})
    assert op_types(run_pass(model, [FOLD])) == ["MatMul", "Mul"]


@pytest.mark.parametrize("where", ["P", "PAdd"])
def test_intermediate_read_elsewhere_stops_the_fold(where):
    model = layer_scale_model()
    model.graph.output.append(helper.make_tensor_value_info(where, F32, [2, 3, 4, N]))
    assert op_types(run_pass(model, [FOLD])) == op_types(model)


def test_float16_bias_whose_scaled_value_would_flush_is_left_alone():
    """Keras' untrained layer scale (γ = 1e-6) times a nonzero float16 bias is below float16's
    normal range, and the bias is added after the MatMul's 2^-k: the Mul stays in float16, and
    folds in float32."""
    model = layer_scale_model(gamma=1e-6)
    assert "Mul" in op_types(run_pass(_as_float16(model), [FOLD]))
    assert "Mul" not in op_types(run_pass(_as_float16(layer_scale_model(gamma=0.5)), [FOLD]))
    assert "Mul" not in op_types(run_pass(model, [FOLD]))
    check_kernel_fusion_numerics(model, random_feeds(model))


@pytest.mark.parametrize("gamma,power", [(1e-6, 20), (3e-5, 16)])
def test_float16_tiny_scale_folds_with_a_power_of_two_the_fused_matmul_takes_back(gamma, power):
    """W·γ below float16's normal range: W·γ·2^k is stored (2^k bringing γ into [1, 2)) and a
    Mul by 2^-k follows the MatMul, which fuse_epilogue makes FusedMatMul's alpha."""
    model = layer_scale_model(gamma=gamma, bias=False)
    half = _as_float16(model)
    folded = run_pass(half, [FOLD])
    assert op_types(folded) == ["MatMul", "Mul", "Add"], op_types(folded)
    matmul, mul = folded.graph.node[0], folded.graph.node[1]
    inits = {t.name: numpy_helper.to_array(t) for t in folded.graph.initializer}
    assert mul.input[0] == matmul.output[0] and inits[mul.input[1]] == np.float16(2.0 ** -power)
    w = numpy_helper.to_array(next(t for t in half.graph.initializer if t.name == "W")).astype(np.float64)
    g = float(np.float16(gamma))
    np.testing.assert_allclose(inits[matmul.input[1]].astype(np.float64), w * g * 2.0 ** power, rtol=1e-3)
    feeds = {k: v.astype(np.float16) for k, v in random_feeds(model).items()}
    assert_same_outputs(half, folded, feeds, rtol=1e-2, atol=1e-3)
    fused = run_pass(half, FOLD_AND_FUSE)
    assert op_types(fused) == ["FusedMatMul"], op_types(fused)
    alpha = [a.f for a in _fused_node(fused).attribute if a.name == "alpha"]
    assert alpha == [2.0 ** -power]
    check_kernel_fusion_numerics(model, random_feeds(model))
