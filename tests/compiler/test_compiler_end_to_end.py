"""Compiled models run on the emulator runtime (tf_popef_op.runtime) against onnxruntime."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler import Compiler, CompilerOptions
from compiler.converter import Converter
from compiler_test_helpers import F32, I32, I64, make_model, ort_run, random_feeds, run_cli
from tf_popef_op.runtime import ModelRunner, kernel_ops


def _run(executable, feeds):
    with ModelRunner(executable) as runner:
        outputs = runner.execute(feeds)
    return [outputs[a["name"]] for a in executable.anchors("output")]


def _check(model, feeds=None, rtol=1e-5, atol=1e-5, options=None):
    feeds = feeds if feeds is not None else random_feeds(model)
    expected = ort_run(model, feeds)
    exe = Compiler.compile(model, [o.name for o in model.graph.output], options)
    got = _run(exe, feeds)
    for e, g in zip(expected, got):
        assert g.dtype == e.dtype and g.shape == e.shape, (g.dtype, g.shape, e.dtype, e.shape)
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
    return exe


def test_every_kernel_op_the_compiler_emits_exists_in_the_runtime():
    emitted = {"Add", "Sub", "Mul", "Div", "MatMul", "Gemm", "Relu", "Sigmoid", "Tanh", "Softmax", "Concat",
               "Transpose", "Cast", "Reshape"}
    assert emitted <= set(kernel_ops())


def test_broadcasting_arithmetic():
    nodes = [helper.make_node("Add", ["X", "W"], ["a"]), helper.make_node("Sub", ["a", "Y"], ["b"]),
             helper.make_node("Mul", ["b", "k"], ["c"]), helper.make_node("Div", ["c", "d"], ["O"])]
    model = make_model(nodes, [("X", F32, [2, 3, 4]), ("Y", F32, [2, 1, 4])], [("O", F32, [2, 3, 4])],
                       {"W": np.linspace(-1, 1, 4, dtype=np.float32), "k": np.array(3.0, np.float32),
                        "d": np.array([1.5, -2.0, 4.0], np.float32).reshape(3, 1)})
    _check(model)


@pytest.mark.parametrize("dtype", [I32, I64])
def test_integer_arithmetic_truncates_division(dtype):
    np_dtype = np.int32 if dtype == I32 else np.int64
    nodes = [helper.make_node("Add", ["X", "Y"], ["a"]), helper.make_node("Div", ["a", "d"], ["O"])]
    model = make_model(nodes, [("X", dtype, [6]), ("Y", dtype, [6])], [("O", dtype, [6])],
                       {"d": np.array([3, -3, 2, 7, -1, 5], np_dtype)})
    feeds = {"X": np.array([7, 7, -7, -20, 9, 0], np_dtype), "Y": np.array([1, -1, 0, 1, 2, -3], np_dtype)}
    _check(model, feeds)


def test_matmul_and_gemm_variants():
    rng = np.random.default_rng(3)
    nodes = [helper.make_node("MatMul", ["X", "W"], ["m"]),                                   # [2,3,4,6]
             helper.make_node("Reshape", ["m", "s"], ["m2"]),                                 # [24,6]
             helper.make_node("Gemm", ["m2", "G", "C"], ["g1"], alpha=0.5, beta=2.0, transB=1),  # [24,5]
             helper.make_node("Gemm", ["A", "g1", "C2"], ["O"], transA=1)]                    # [7,5]
    model = make_model(nodes, [("X", F32, [2, 3, 4, 6]), ("A", F32, [24, 7])], [("O", F32, [7, 5])],
                       {"W": rng.standard_normal((6, 6)).astype(np.float32), "s": np.array([24, 6], np.int64),
                        "G": rng.standard_normal((5, 6)).astype(np.float32),
                        "C": rng.standard_normal(5).astype(np.float32),
                        "C2": rng.standard_normal((7, 1)).astype(np.float32)})
    _check(model, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("opset, axis", [(11, 1), (11, -1), (13, 1), (13, -1)])
def test_activations_and_softmax(opset, axis):
    nodes = [helper.make_node("Relu", ["X"], ["r"]), helper.make_node("Sigmoid", ["r"], ["s"]),
             helper.make_node("Tanh", ["X"], ["t"]), helper.make_node("Add", ["s", "t"], ["a"]),
             helper.make_node("Softmax", ["a"], ["O"], axis=axis)]
    model = make_model(nodes, [("X", F32, [2, 3, 4])], [("O", F32, [2, 3, 4])], opset=opset)
    _check(model)


def test_concat_transpose_cast():
    nodes = [helper.make_node("Transpose", ["X"], ["t"], perm=[0, 2, 1]),
             helper.make_node("Concat", ["t", "C"], ["c"], axis=-1),
             helper.make_node("Cast", ["c"], ["i"], to=TensorProto.INT64),
             helper.make_node("Cast", ["i"], ["O"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["X"], ["B"], to=TensorProto.BOOL)]
    model = make_model(nodes, [("X", F32, [2, 3, 4])], [("O", F32, [2, 4, 5]), ("B", TensorProto.BOOL, [2, 3, 4])],
                       {"C": np.full((2, 4, 2), -2.7, np.float32)})
    feeds = {"X": (np.random.default_rng(0).standard_normal((2, 3, 4)) * 5).astype(np.float32)}
    feeds["X"][0, 0, 0] = 0.0
    _check(model, feeds)


def test_views_with_aliasing_and_copies():
    nodes = [helper.make_node("Relu", ["X"], ["r"]),
             helper.make_node("Flatten", ["r"], ["f"], axis=1),                 # view of an arena tensor
             helper.make_node("Unsqueeze", ["f", "ax0"], ["u"]),
             helper.make_node("Squeeze", ["u", "ax0"], ["q"]),
             helper.make_node("Identity", ["q"], ["i"]),
             helper.make_node("Sigmoid", ["X"], ["s"]),                         # reads X while r's view lives
             helper.make_node("Reshape", ["s", "shape"], ["sv"]),
             helper.make_node("Add", ["i", "sv"], ["O"]),
             helper.make_node("Reshape", ["X", "shape"], ["P"])]               # input -> output copy
    model = make_model(nodes, [("X", F32, [2, 3, 4])], [("O", F32, [2, 12]), ("P", F32, [2, 12]), ("K", I64, [3])],
                       {"ax0": np.array([0], np.int64), "shape": np.array([2, 12], np.int64),
                        "K": np.array([4, 5, 6], np.int64)})
    exe = _check(model)
    assert any(s["name"] == "copy_to_output:K" for s in exe.executable["programs"]["main"])


def test_exported_style_model_with_dynamic_batch_and_shape_subgraph():
    rng = np.random.default_rng(1)
    nodes = [helper.make_node("Shape", ["X"], ["s"]), helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
             helper.make_node("Unsqueeze", ["b"], ["bu"], axes=[0]),
             helper.make_node("Concat", ["bu", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["X", "target"], ["flat"]),
             helper.make_node("Gemm", ["flat", "W", "B"], ["g"], transB=1), helper.make_node("Relu", ["g"], ["r"]),
             helper.make_node("Softmax", ["r"], ["Y"], axis=1)]
    inits = {"W": rng.standard_normal((5, 12)).astype(np.float32), "B": rng.standard_normal(5).astype(np.float32),
             "zero": np.array(0, np.int64), "minus1": np.array([-1], np.int64)}
    dynamic = make_model(nodes, [("X", F32, ["N", 3, 4])], [("Y", F32, ["N", 5])], inits, opset=11)
    static = make_model(nodes, [("X", F32, [6, 3, 4])], [("Y", F32, [6, 5])], inits, opset=11)
    feeds = random_feeds(static)
    exe = Compiler.compile(dynamic, ["Y"], CompilerOptions(batch_size=6))
    assert [s["op"] for s in exe.executable["programs"]["main"]] == ["Reshape", "FusedGemm", "Softmax"]
    np.testing.assert_allclose(_run(exe, feeds)[0], ort_run(static, feeds)[0], rtol=1e-5, atol=1e-6)


def test_fp16_conversion_runs_close_to_fp32():
    rng = np.random.default_rng(2)
    nodes = [helper.make_node("Gemm", ["X", "W", "B"], ["g"]), helper.make_node("Tanh", ["g"], ["t"]),
             helper.make_node("MatMul", ["t", "W2"], ["m"]), helper.make_node("Softmax", ["m"], ["Y"], axis=-1)]
    model = make_model(nodes, [("X", F32, [4, 16])], [("Y", F32, [4, 8])],
                       {"W": (rng.standard_normal((16, 32)) / 4).astype(np.float32),
                        "B": rng.standard_normal(32).astype(np.float32),
                        "W2": (rng.standard_normal((32, 8)) / 6).astype(np.float32)})
    feeds = random_feeds(model)
    half = Converter(precision="fp16").convert(model)
    exe = Compiler.compile(half, ["Y"])
    got = _run(exe, {"X": feeds["X"].astype(np.float16)})[0]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float32), ort_run(model, feeds)[0], rtol=2e-2, atol=2e-3)


def test_long_chain_reusing_arena_bytes_computes_correctly():
    ops = ["Relu", "Sigmoid", "Tanh", "Relu", "Sigmoid", "Tanh", "Relu", "Sigmoid"]
    names = ["X"] + [f"t{i}" for i in range(len(ops) - 1)] + ["O"]
    nodes = [helper.make_node(op, [names[i]], [names[i + 1]]) for i, op in enumerate(ops)]
    nodes.append(helper.make_node("Add", ["O", "t2"], ["P"]))
    model = make_model(nodes, [("X", F32, [32, 32])], [("O", F32, [32, 32]), ("P", F32, [32, 32])])
    exe = _check(model)
    assert exe.arena_bytes < 7 * 32 * 32 * 4


def test_cli_run_on_the_real_runtime(tmp_path):
    import onnx
    model = make_model([helper.make_node("Add", ["X", "Y"], ["O"])], [("X", F32, ["N", 2]), ("Y", F32, ["N", 2])],
                       [("O", F32, ["N", 2])])
    onnx.save(model, str(tmp_path / "add.onnx"))
    result = run_cli(["--input_model", "add.onnx", "--batch_size", "4", "--precision", "fp16", "--run"],
                     cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "ran once on the emulator with random inputs:\n  O: float16 [4, 2]" in result.stdout
