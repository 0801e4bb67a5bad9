"""benchmarks/compare_popefs.py on two small PopEFs of one model (blocked layout on and off): one
row with their conversion steps and B / A, and a clear stop when their outputs differ."""
import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import Compiler
from compiler.options import CompilerOptions

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "compare_popefs.py")


def conv_model(seed):
    w = np.random.default_rng(seed).standard_normal((16, 8, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["X", "W"], ["C"], pads=[1, 1, 1, 1]),
             helper.make_node("AveragePool", ["C"], ["Y"], kernel_shape=[2, 2], strides=[2, 2])]
    graph = helper.make_graph(nodes, "conv_pool", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 8, 6, 6])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 16, 3, 3])],
                              [numpy_helper.from_array(w, "W")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def run(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": ROOT})


@pytest.fixture(scope="module")
def popefs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("compare_popefs")
    paths = {}
    for name, model, blocked in (("plain", conv_model(0), False), ("blocked", conv_model(0), True),
                                 ("other", conv_model(1), True)):
        paths[name] = str(folder / f"{name}.popef")
        Compiler.compile(model, options=CompilerOptions(blocked_layout=blocked)).save(paths[name])
    return paths


def test_one_row_per_pair_with_conversion_steps(popefs):
    result = run(popefs["plain"], popefs["blocked"], "--iters", "2", "--profile-iters", "1", "--label", "tiny")
    assert result.returncode == 0, result.stderr
    (row,) = [line for line in result.stdout.splitlines() if line.startswith("| tiny |")]
    assert row.startswith("| tiny | 0 + 0 → 1 + 1 |")  # the blocked one converts in and out


def test_outputs_that_differ_stop_the_comparison(popefs):
    result = run(popefs["blocked"], popefs["other"], "--iters", "2")
    assert result.returncode != 0 and "output 'Y' differs" in result.stderr


def test_popefs_come_in_pairs(popefs):
    result = run(popefs["blocked"])
    assert result.returncode == 2 and "give the PopEFs in pairs" in result.stderr
