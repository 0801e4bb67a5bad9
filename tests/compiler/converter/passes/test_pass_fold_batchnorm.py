"""fold_batchnorm: BatchNormalization after Conv / ConvTranspose / Gemm / MatMul disappears into
the producer's weights; the graph after the pass is checked against onnxruntime running the
original model (fp32), then compiled and run on the emulator in fp32 and fp16."""
import numpy as np
import pytest
from onnx import helper

from compiler import Compiler
from compiler.converter import Converter
from compiler_test_helpers import F32, make_model, op_types, ort_run, random_feeds, run_pass
from tf_popef_op.runtime import ModelRunner, RuntimeConfig

RNG = np.random.default_rng(0)


def _bn_inits(m, prefix="bn"):
    return {f"{prefix}_scale": RNG.uniform(0.5, 1.5, m).astype(np.float32),
            f"{prefix}_bias": RNG.standard_normal(m).astype(np.float32),
            f"{prefix}_mean": RNG.standard_normal(m).astype(np.float32),
            f"{prefix}_var": RNG.uniform(0.3, 2.0, m).astype(np.float32)}


def _bn(x, y, prefix="bn", **attrs):
    return helper.make_node("BatchNormalization", [x] + [f"{prefix}_{k}" for k in ("scale", "bias", "mean", "var")],
                            [y], name=prefix, **attrs)


def conv_bn(bias=True, group=1, epsilon=1e-3):
    c, m = 4, 8
    inits = {"W": RNG.standard_normal((m, c // group, 3, 3)).astype(np.float32), **_bn_inits(m)}
    inputs = ["X", "W"]
    if bias:
        inits["B"] = RNG.standard_normal(m).astype(np.float32)
        inputs.append("B")
    nodes = [helper.make_node("Conv", inputs, ["C"], pads=[1, 1, 1, 1], group=group, name="conv"),
             _bn("C", "Y", epsilon=epsilon)]
    return make_model(nodes, [("X", F32, [2, c, 6, 6])], [("Y", F32, [2, m, 6, 6])], inits)


def conv_transpose_bn(group=2):
    c, m = 4, 6
    inits = {"W": RNG.standard_normal((c, m // group, 3, 3)).astype(np.float32),
             "B": RNG.standard_normal(m).astype(np.float32), **_bn_inits(m)}
    nodes = [helper.make_node("ConvTranspose", ["X", "W", "B"], ["C"], strides=[2, 2], group=group, name="deconv"),
             _bn("C", "Y")]
    return make_model(nodes, [("X", F32, [1, c, 5, 5])], [("Y", F32, [1, m, 11, 11])], inits)


def gemm_bn(trans_b, c_shape):
    k, m = 5, 7
    inits = {"W": RNG.standard_normal((m, k) if trans_b else (k, m)).astype(np.float32), **_bn_inits(m)}
    inputs = ["X", "W"]
    if c_shape is not None:
        inits["C"] = RNG.standard_normal(c_shape).astype(np.float32)
        inputs.append("C")
    nodes = [helper.make_node("Gemm", inputs, ["G"], transB=int(trans_b), alpha=0.7, beta=1.3, name="gemm"),
             _bn("G", "Y")]
    return make_model(nodes, [("X", F32, [3, k])], [("Y", F32, [3, m])], inits)


def matmul_bn():
    inits = {"W": RNG.standard_normal((5, 7)).astype(np.float32), **_bn_inits(7)}
    nodes = [helper.make_node("MatMul", ["X", "W"], ["G"], name="mm"), _bn("G", "Y")]
    return make_model(nodes, [("X", F32, [3, 5])], [("Y", F32, [3, 7])], inits)


def _check(model, expected_ops, rtol=1e-5):
    feeds = random_feeds(model)
    want = ort_run(model, feeds)[0]
    folded = run_pass(model, ["fold_batchnorm", "eliminate_unused_initializers"])
    assert op_types(folded) == expected_ops
    np.testing.assert_allclose(ort_run(folded, feeds)[0], want, rtol=rtol, atol=1e-5)
    for precision, tol in (("fp32", 1e-4), ("fp16", 2e-2)):
        converted = Converter(precision=precision).convert(model)
        assert "BatchNormalization" not in op_types(converted)
        f = {k: v.astype(np.float16) if precision == "fp16" else v for k, v in feeds.items()}
        got = ModelRunner(Compiler.compile(converted), RuntimeConfig()).execute(f)["Y"].astype(np.float32)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max())))


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("group", [1, 2, 4])
def test_conv_bn_becomes_one_conv(bias, group):
    _check(conv_bn(bias=bias, group=group), ["Conv"])


def test_conv_transpose_bn_with_groups():
    _check(conv_transpose_bn(group=2), ["ConvTranspose"])


@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("c_shape", [None, (7,), (1, 7), (3, 7), (3, 1)])
def test_gemm_bn_folds_into_b_and_c(trans_b, c_shape):
    _check(gemm_bn(trans_b, c_shape), ["Gemm"])


def test_matmul_bn_becomes_matmul_and_add():
    _check(matmul_bn(), ["MatMul", "Add"])


def test_folded_weights_are_new_tensors_so_shared_weights_stay_intact():
    model = conv_bn()
    # A second Conv reads the same W without a BN: its result must not change.
    model.graph.node.append(helper.make_node("Conv", ["X", "W"], ["Z"], pads=[1, 1, 1, 1], name="other"))
    model.graph.output.append(helper.make_tensor_value_info("Z", F32, [2, 8, 6, 6]))
    feeds = random_feeds(model)
    want = ort_run(model, feeds)
    folded = run_pass(model, "fold_batchnorm")
    assert op_types(folded) == ["Conv", "Conv"]
    for w, g in zip(want, ort_run(folded, feeds)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_bn_stays_when_the_producer_has_another_reader_or_is_an_output():
    model = conv_bn()
    model.graph.output.append(helper.make_tensor_value_info("C", F32, [2, 8, 6, 6]))
    assert "BatchNormalization" in op_types(run_pass(model, "fold_batchnorm"))


def test_bn_stays_when_the_weights_are_computed_at_run_time():
    model = conv_bn()
    del model.graph.initializer[[t.name for t in model.graph.initializer].index("W")]
    model.graph.input.append(helper.make_tensor_value_info("W", F32, [8, 4, 3, 3]))
    assert op_types(run_pass(model, "fold_batchnorm")) == ["Conv", "BatchNormalization"]


def test_lone_bn_stays_a_kernel():
    inits = _bn_inits(3)
    model = make_model([_bn("X", "Y")], [("X", F32, [2, 3, 4, 4])], [("Y", F32, [2, 3, 4, 4])], inits)
    assert op_types(run_pass(model, "fold_batchnorm")) == ["BatchNormalization"]


def test_matmul_on_3d_input_is_not_folded():
    # BN's channel axis is 1, which for a [B, S, K] x [K, N] product is not the weights' axis.
    inits = {"W": RNG.standard_normal((5, 7)).astype(np.float32), **_bn_inits(4)}
    nodes = [helper.make_node("MatMul", ["X", "W"], ["G"]), _bn("G", "Y")]
    model = make_model(nodes, [("X", F32, [2, 4, 5])], [("Y", F32, [2, 4, 7])], inits)
    assert op_types(run_pass(model, "fold_batchnorm")) == ["MatMul", "BatchNormalization"]
