"""End-to-end numerics: ONNX -> compiler -> PopEF -> emulator runtime, against onnxruntime."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from e2e_helpers import compile_and_run, run_onnxruntime

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, initializers=(), opset=13):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def mlp(rng, batch=8, sizes=(32, 64, 16), opset=13):
    inits, nodes, prev = [], [], "X"
    for i, (k, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        inits += [numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32) * 0.2, f"W{i}"),
                  numpy_helper.from_array(rng.standard_normal(n).astype(np.float32) * 0.1, f"B{i}")]
        nodes.append(helper.make_node("Gemm", [prev, f"W{i}", f"B{i}"], [f"G{i}"], name=f"gemm{i}"))
        act = "Relu" if i % 2 == 0 else "Tanh"
        nodes.append(helper.make_node(act, [f"G{i}"], [f"A{i}"], name=f"act{i}"))
        prev = f"A{i}"
    nodes.append(helper.make_node("Softmax", [prev], ["Y"], axis=-1, name="softmax"))
    return _model(nodes, [helper.make_tensor_value_info("X", F, (batch, sizes[0]))],
                  [helper.make_tensor_value_info("Y", F, (batch, sizes[-1]))], inits, opset)


def assert_close(got, want, rtol, atol):
    assert set(got) == set(want), (sorted(got), sorted(want))
    for name in want:
        np.testing.assert_allclose(np.asarray(got[name], np.float32), np.asarray(want[name], np.float32),
                                   rtol=rtol, atol=atol, err_msg=name)


@pytest.mark.parametrize("opset", [11, 13])
def test_mlp_fp32(rng, opset):
    model = mlp(rng, opset=opset)
    x = {"X": rng.standard_normal((8, 32)).astype(np.float32)}
    assert_close(compile_and_run(model, x), run_onnxruntime(model, x), rtol=1e-5, atol=1e-6)


def test_mlp_fp16_stays_close_to_fp32_oracle(rng):
    model = mlp(rng)
    x = {"X": rng.standard_normal((8, 32)).astype(np.float32)}
    got = compile_and_run(model, x, precision="fp16")
    assert got["Y"].dtype == np.float16
    assert_close(got, run_onnxruntime(model, x), rtol=2e-2, atol=2e-3)


def test_broadcast_arithmetic_and_activations(rng):
    nodes = [
        helper.make_node("MatMul", ["A", "B"], ["M"]),          # batched, broadcast batch dims
        helper.make_node("Sub", ["M", "c"], ["S"]),              # trailing-dim broadcast
        helper.make_node("Mul", ["S", "s"], ["P"]),              # scalar
        helper.make_node("Div", ["P", "d"], ["Q"]),              # middle-dim broadcast
        helper.make_node("Sigmoid", ["Q"], ["Y1"]),
        helper.make_node("Tanh", ["Q"], ["T"]),
        helper.make_node("Add", ["T", "Q"], ["Y2"]),
    ]
    inits = [numpy_helper.from_array(rng.standard_normal(5).astype(np.float32), "c"),
             numpy_helper.from_array(np.array(1.5, np.float32), "s"),
             numpy_helper.from_array(rng.uniform(1, 2, (3, 1, 5)).astype(np.float32), "d")]
    model = _model(nodes,
                   [helper.make_tensor_value_info("A", F, (2, 3, 4, 6)), helper.make_tensor_value_info("B", F, (6, 5))],
                   [helper.make_tensor_value_info("Y1", F, (2, 3, 4, 5)), helper.make_tensor_value_info("Y2", F, (2, 3, 4, 5))],
                   inits)
    x = {"A": rng.standard_normal((2, 3, 4, 6)).astype(np.float32), "B": rng.standard_normal((6, 5)).astype(np.float32)}
    assert_close(compile_and_run(model, x), run_onnxruntime(model, x), rtol=1e-5, atol=1e-6)


def test_layout_ops(rng):
    shape_const = numpy_helper.from_array(np.array([2, 12, 5], np.int64), "shape")
    nodes = [
        helper.make_node("Transpose", ["X"], ["T"], perm=[0, 2, 1, 3]),   # (2,4,3,5)
        helper.make_node("Reshape", ["T", "shape"], ["R"]),               # (2,12,5)
        helper.make_node("Concat", ["R", "Z"], ["C"], axis=1),            # (2,14,5)
        helper.make_node("Flatten", ["C"], ["Fl"], axis=1),               # (2,70)
        helper.make_node("Identity", ["Fl"], ["I"]),
        helper.make_node("Relu", ["I"], ["Y"]),
        helper.make_node("Softmax", ["C"], ["S"], axis=1),
    ]
    model = _model(nodes,
                   [helper.make_tensor_value_info("X", F, (2, 3, 4, 5)), helper.make_tensor_value_info("Z", F, (2, 2, 5))],
                   [helper.make_tensor_value_info("Y", F, (2, 70)), helper.make_tensor_value_info("S", F, (2, 14, 5))],
                   [shape_const])
    x = {"X": rng.standard_normal((2, 3, 4, 5)).astype(np.float32), "Z": rng.standard_normal((2, 2, 5)).astype(np.float32)}
    assert_close(compile_and_run(model, x), run_onnxruntime(model, x), rtol=1e-6, atol=1e-7)


def test_softmax_opset11_coerces_to_2d(rng):
    nodes = [helper.make_node("Softmax", ["X"], ["Y"], axis=1)]
    model = _model(nodes, [helper.make_tensor_value_info("X", F, (2, 3, 4))],
                   [helper.make_tensor_value_info("Y", F, (2, 3, 4))], opset=11)
    x = {"X": rng.standard_normal((2, 3, 4)).astype(np.float32)}
    assert_close(compile_and_run(model, x), run_onnxruntime(model, x), rtol=1e-6, atol=1e-7)


def test_cast_int_and_back(rng):
    nodes = [helper.make_node("Cast", ["X"], ["I"], to=TensorProto.INT32),
             helper.make_node("Cast", ["I"], ["Y"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["X"], ["B"], to=TensorProto.BOOL)]
    model = _model(nodes, [helper.make_tensor_value_info("X", F, (3, 4))],
                   [helper.make_tensor_value_info("Y", F, (3, 4)), helper.make_tensor_value_info("B", TensorProto.BOOL, (3, 4))])
    x = {"X": (rng.standard_normal((3, 4)) * 10).astype(np.float32)}
    x["X"][0, 0] = 0.0
    got, want = compile_and_run(model, x), run_onnxruntime(model, x)
    np.testing.assert_array_equal(got["Y"], want["Y"])
    np.testing.assert_array_equal(got["B"], want["B"])


def test_gemm_transposes_alpha_beta(rng):
    nodes = [helper.make_node("Gemm", ["A", "B", "C"], ["Y"], alpha=0.5, beta=2.0, transA=1, transB=1)]
    inits = [numpy_helper.from_array(rng.standard_normal((5, 7)).astype(np.float32), "B"),
             numpy_helper.from_array(rng.standard_normal((1, 5)).astype(np.float32), "C")]
    model = _model(nodes, [helper.make_tensor_value_info("A", F, (7, 3))],
                   [helper.make_tensor_value_info("Y", F, (3, 5))], inits)
    x = {"A": rng.standard_normal((7, 3)).astype(np.float32)}
    assert_close(compile_and_run(model, x), run_onnxruntime(model, x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_core_float_kernels_in_one_graph_fp16_and_fp32(rng, precision):
    """A graph touching each float kernel once, so both storage types go through every kernel."""
    nodes = [
        helper.make_node("MatMul", ["X", "W"], ["M"]),
        helper.make_node("Gemm", ["M", "W2", "b"], ["G"]),
        helper.make_node("Add", ["G", "b"], ["A"]),
        helper.make_node("Sub", ["A", "b"], ["S"]),
        helper.make_node("Mul", ["S", "S"], ["Mu"]),
        helper.make_node("Div", ["Mu", "two"], ["D"]),
        helper.make_node("Relu", ["D"], ["R"]),
        helper.make_node("Sigmoid", ["R"], ["Sg"]),
        helper.make_node("Tanh", ["Sg"], ["Th"]),
        helper.make_node("Transpose", ["Th"], ["Tr"], perm=[1, 0]),
        helper.make_node("Reshape", ["Tr", "shp"], ["Rs"]),
        helper.make_node("Flatten", ["Rs"], ["Fl"], axis=0),
        helper.make_node("Concat", ["Fl", "Fl"], ["Cc"], axis=1),
        helper.make_node("Softmax", ["Cc"], ["Y"], axis=1),
    ]
    inits = [numpy_helper.from_array(rng.standard_normal((8, 6)).astype(np.float32) * 0.3, "W"),
             numpy_helper.from_array(rng.standard_normal((6, 6)).astype(np.float32) * 0.3, "W2"),
             numpy_helper.from_array(rng.standard_normal(6).astype(np.float32) * 0.1, "b"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two"),
             numpy_helper.from_array(np.array([3, 8], np.int64), "shp")]
    model = _model(nodes, [helper.make_tensor_value_info("X", F, (4, 8))],
                   [helper.make_tensor_value_info("Y", F, (1, 48))], inits)
    x = {"X": rng.standard_normal((4, 8)).astype(np.float32)}
    tol = dict(rtol=1e-5, atol=1e-7) if precision == "fp32" else dict(rtol=1e-2, atol=1e-4)
    assert_close(compile_and_run(model, x, precision), run_onnxruntime(model, x), **tol)


@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("m,k,n", [(1, 7, 5), (6, 7, 1), (1, 9, 1), (1, 1, 4)])
def test_gemm_single_row_or_column_paths(rng, trans_a, trans_b, m, k, n):
    """m == 1 or n == 1 runs BLAS's matrix-vector path: every transpose combination."""
    a_shape = (k, m) if trans_a else (m, k)
    b_shape = (n, k) if trans_b else (k, n)
    nodes = [helper.make_node("Gemm", ["A", "B", "C"], ["Y"], alpha=0.75, beta=1.5, transA=trans_a, transB=trans_b),
             helper.make_node("MatMul", ["Y", "D"], ["Z"])]
    inits = [numpy_helper.from_array(rng.standard_normal(b_shape).astype(np.float32), "B"),
             numpy_helper.from_array(rng.standard_normal((m, n)).astype(np.float32), "C"),
             numpy_helper.from_array(rng.standard_normal((n, 1)).astype(np.float32), "D")]
    model = _model(nodes, [helper.make_tensor_value_info("A", F, a_shape)],
                   [helper.make_tensor_value_info("Y", F, (m, n)), helper.make_tensor_value_info("Z", F, (m, 1))], inits)
    x = {"A": rng.standard_normal(a_shape).astype(np.float32)}
    assert_close(compile_and_run(model, x), run_onnxruntime(model, x), rtol=1e-5, atol=1e-6)
