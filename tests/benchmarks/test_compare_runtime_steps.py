"""benchmarks/compare_runtime_steps.py on a small PopEF (a 1x1 expand, a depthwise 3x3 with
Swish, a 1x1 project), this checkout as both builds: one row per kind and per layer, and a clear
stop without the ONNX model."""
import os
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from compiler import Compiler
from compiler.options import CompilerOptions

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "compare_runtime_steps.py")


def block_model():
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.2, n)
             for n, s in (("We", (32, 8, 1, 1)), ("Wd", (32, 1, 3, 3)), ("Wp", (16, 32, 1, 1)))]
    nodes = [helper.make_node("Conv", ["X", "We"], ["E"], name="expand"),
             helper.make_node("Conv", ["E", "Wd"], ["D"], name="depthwise", group=32, pads=[1, 1, 1, 1]),
             helper.make_node("Sigmoid", ["D"], ["S"]), helper.make_node("Mul", ["D", "S"], ["A"]),
             helper.make_node("Conv", ["A", "Wp"], ["Y"], name="project")]
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 8, 12, 12])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 16, 12, 12])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": ROOT})


def test_rows_per_kind_and_layer(tmp_path):
    model = block_model()
    onnx_path, popef = str(tmp_path / "block.onnx"), str(tmp_path / "block.popef")
    onnx.save(model, onnx_path)
    # the three convolutions as their own steps (not one fused NchwcInvertedResidual)
    Compiler.compile(model, options=CompilerOptions(inverted_residual="off")).save(popef)
    out = run(ROOT, ROOT, popef, "--onnx", onnx_path, "--rounds", "1", "--runs", "2")
    assert out.returncode == 0, out.stderr
    rows = [line.split(" | ")[0].strip("| ") for line in out.stdout.splitlines() if line.startswith("| ")]
    for row in ("depthwise 3x3 s1", "1x1 expand", "1x1 other", "all convolutions",
                "depthwise 3x3 s1 32ch @12", "1x1 8->32 @12", "1x1 32->16 @12"):
        assert row in rows, out.stdout


def test_needs_the_onnx_model(tmp_path):
    out = run(ROOT, ROOT, str(tmp_path / "missing.popef"))
    assert out.returncode != 0 and "--onnx" in out.stderr
