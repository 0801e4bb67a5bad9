"""TF_POPEF_SIMD selects the kernels' vector-math path once per process (kernels/support/vector_math.h):
'auto' (default) and 'portable' must give the same results within the documented few ulp, both
matching onnxruntime, and a bad value must fail the model's preparation with a clear error.
Checked in fresh processes because the path is read once."""
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import tf_popef_op

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(tf_popef_op.__file__)))
SHAPE = [4, 64, 257]  # 65,792 elements: large enough to split across the intra-op pool

SCRIPT = """
import sys
import numpy as np
import onnx
from compiler import Compiler
from compiler.converter import Converter
from tf_popef_op import runtime

model = onnx.load(sys.argv[1])
try:
    runner = runtime.ModelRunner(Compiler.compile(Converter().convert(model).SerializeToString(), ["Y"]),
                                 runtime.RuntimeConfig())
except runtime.InvalidArgumentError as e:
    print("InvalidArgumentError:", e)
    sys.exit(0)
x = np.load(sys.argv[2])
out = {"Y": np.zeros_like(x)}
runner.execute({"X": x}, out)
np.save(sys.argv[3], out["Y"])
print("ok")
"""


def _activation_chain():
    """Y = Softmax(Gelu(Tanh(Sigmoid(X)) · 4 + Elu(X)) + Exp(-|X|)), every vector-math function."""
    f = TensorProto.FLOAT
    four = helper.make_tensor("four", f, [], [4.0])
    nodes = [
        helper.make_node("Sigmoid", ["X"], ["s"]),
        helper.make_node("Tanh", ["s"], ["t"]),
        helper.make_node("Mul", ["t", "four"], ["t4"]),
        helper.make_node("Elu", ["X"], ["e"], alpha=0.5),
        helper.make_node("Add", ["t4", "e"], ["a"]),
        helper.make_node("Gelu", ["a"], ["g"]),
        helper.make_node("Abs", ["X"], ["ax"]),
        helper.make_node("Neg", ["ax"], ["nx"]),
        helper.make_node("Exp", ["nx"], ["ex"]),
        helper.make_node("Add", ["g", "ex"], ["z"]),
        helper.make_node("Softmax", ["z"], ["Y"], axis=-1),
    ]
    graph = helper.make_graph(nodes, "simd_chain", [helper.make_tensor_value_info("X", f, SHAPE)],
                              [helper.make_tensor_value_info("Y", f, SHAPE)], [four])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def _run(tmp_path, model_path, x_path, simd):
    env = dict(os.environ)
    env.pop("TF_POPEF_SIMD", None)
    if simd is not None:
        env["TF_POPEF_SIMD"] = simd
    out_path = tmp_path / f"y_{simd}.npy"
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(model_path), str(x_path), str(out_path)], env=env,
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip(), out_path


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("simd")
    model = _activation_chain()
    model_path = tmp / "chain.onnx"
    onnx.save(model, str(model_path))
    x = (np.random.default_rng(5).standard_normal(SHAPE) * 3).astype(np.float32)
    x_path = tmp / "x.npy"
    np.save(x_path, x)
    oracle = onnx.ModelProto()
    oracle.CopyFrom(model)
    oracle.ir_version = 8
    expected = ort.InferenceSession(oracle.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        ["Y"], {"X": x})[0]
    return model_path, x_path, expected


def test_auto_and_portable_paths_agree_with_onnxruntime(chain, tmp_path):
    model_path, x_path, expected = chain
    outputs = {}
    for simd in (None, "portable"):
        status, out_path = _run(tmp_path, model_path, x_path, simd)
        assert status == "ok"
        outputs[simd] = np.load(out_path)
        np.testing.assert_allclose(outputs[simd], expected, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(outputs[None], outputs["portable"], rtol=1e-5, atol=1e-8)


def test_bad_simd_value_fails_preparation_clearly(chain, tmp_path):
    model_path, x_path, _ = chain
    status, _ = _run(tmp_path, model_path, x_path, "sse9")
    assert status.startswith("InvalidArgumentError:"), status
    assert "TF_POPEF_SIMD=\"sse9\": expected 'auto', 'avx512', 'avx2' or 'portable'" in status
