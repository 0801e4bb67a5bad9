"""Gelu (the vector math's x·Φ(x), kernels/support/vector_math*.cc) on every SIMD path, as an op
and as the packed GEMM's epilogue (MatMul + bias + Gelu, fused by the compiler), against
onnxruntime where its 1 + erf is exact enough (x >= -3) and against x·erfc(-x/√2)/2 in double
precision over the whole range: the negative side keeps its relative accuracy down to the
denormal results near x = -14. float32 and float16; each path in a new process (TF_POPEF_SIMD is
read once per process)."""
import math

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from e2e_helpers import assert_matches_fp32_reference, compile_and_run, run_in_new_process, run_onnxruntime

F = TensorProto.FLOAT
ROWS, K, N = 37, 24, 131  # odd: partial row tiles, panels and vector tails
CASES = ["gelu_op", "matmul_bias_gelu"]


def _cpu_has_avx512():
    with open("/proc/cpuinfo") as f:
        flags = f.read()
    return " avx512f" in flags and " avx512vl" in flags


def exact_gelu(x):
    return np.array([0.5 * v * math.erfc(-v / math.sqrt(2.0)) for v in np.asarray(x, np.float64).ravel()]).reshape(
        np.shape(x))


def model_and_input(name):
    rng = np.random.default_rng(11)
    if name == "gelu_op":
        # Dense over [-14.3, 8] (every region of the approximation), an odd count for the tails.
        x = np.linspace(-14.3, 8.0, 3 * 1031, dtype=np.float32).reshape(3, 1031)
        node = helper.make_node("Gelu", ["X"], ["Y"])
        graph = helper.make_graph([node], "gelu", [helper.make_tensor_value_info("X", F, list(x.shape))],
                                  [helper.make_tensor_value_info("Y", F, list(x.shape))])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), x
    # Pre-activations of about N(0, 4²) reach x << 0, where the epilogue's Gelu must stay relative.
    w = numpy_helper.from_array((4.0 * rng.standard_normal((K, N)) / math.sqrt(K)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal(N).astype(np.float32), "B")
    nodes = [helper.make_node("MatMul", ["X", "W"], ["m"]), helper.make_node("Add", ["m", "B"], ["a"]),
             helper.make_node("Gelu", ["a"], ["Y"])]
    graph = helper.make_graph(nodes, "matmul_bias_gelu", [helper.make_tensor_value_info("X", F, [ROWS, K])],
                              [helper.make_tensor_value_info("Y", F, [ROWS, N])], [w, b])
    x = rng.standard_normal((ROWS, K)).astype(np.float32)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), x


def check_case(name, precision):
    model, x = model_and_input(name)
    got = compile_and_run(model, {"X": x}, precision)["Y"].astype(np.float32)
    want = run_onnxruntime(model, {"X": x})["Y"]
    assert_matches_fp32_reference(got, want, precision, name, atol=1e-6)
    if precision == "fp16":
        return
    if name == "gelu_op":
        pre = x
    else:
        init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        pre = (x.astype(np.float64) @ init["W"] + init["B"]).astype(np.float32)
    exact = exact_gelu(pre)
    assert (pre < -3.0).sum() > 10, f"{name}: the input does not reach x < -3"
    if name == "gelu_op":
        np.testing.assert_allclose(got, exact, rtol=1e-6, atol=1e-44, err_msg=f"{name} against x·erfc(-x/√2)/2")
        return
    # The GEMM rounds its sums differently from numpy: relative 1e-4 covers that where |x| >= 0.1
    # (d ln Gelu / dx is at most ~|x| + 1/|x|); near the zero of Gelu an absolute bound.
    far = np.abs(pre) >= 0.1
    np.testing.assert_allclose(got[far], exact[far], rtol=1e-4, atol=1e-44, err_msg=f"{name}, |x| >= 0.1")
    np.testing.assert_allclose(got[~far], exact[~far], rtol=0, atol=1e-6, err_msg=f"{name}, |x| < 0.1")


def _check_in_new_process(**env):
    script = ("import test_gelu_paths as t\n"
              "for name in t.CASES:\n"
              "    for precision in ('fp32', 'fp16'):\n"
              "        t.check_case(name, precision)\n"
              "print('checked', 2 * len(t.CASES))\n")
    assert f"checked {2 * len(CASES)}" in run_in_new_process(script, **env)


@pytest.mark.parametrize("simd", ["portable", "avx2", "avx512"])
def test_gelu_on_every_simd_path(simd):
    if simd == "avx512" and not _cpu_has_avx512():
        pytest.xfail("this CPU has no AVX-512F/VL: the avx512 path cannot run here")
    _check_in_new_process(TF_POPEF_SIMD=simd, TF_POPEF_NUM_THREADS="2")
