"""benchmarks/compare_device_memory.py on a small cached PopEF under one checkout and two
environments (weights in the file mmap against copied): one row per cell with both medians and
their ratio, the memory columns, every timed run with --per-run, and clear stops for a missing
PopEF or two identical sides."""
import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import Compiler
from compiler.options import CompilerOptions

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "benchmarks", "compare_device_memory.py")


def conv_model():
    w = np.random.default_rng(0).standard_normal((32, 32, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["X", "W"], ["Y"], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 32, 96, 96])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 32, 96, 96])],
                              [numpy_helper.from_array(w, "W")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    folder = tmp_path_factory.mktemp("compare_device_memory")
    Compiler.compile(conv_model(), options=CompilerOptions(batch_size=1)).save(str(folder / "tinyconv-abc-b1-fp32.popef"))
    return str(folder)


def run(cache, *args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": ROOT, "TF_POPEF_BENCH_CACHE": cache})


def test_one_row_per_cell_and_every_run(cache):
    result = run(cache, ROOT, ROOT, "--new-env", "TF_POPEF_MMAP_WEIGHTS=0", "--cells", "tinyconv:1:fp32",
                 "--rounds", "2", "--runs", "3", "--warmup", "1", "--per-run")
    assert result.returncode == 0, result.stderr
    (row,) = [line for line in result.stdout.splitlines() if line.startswith("| tinyconv:1:fp32 |")]
    cols = [c.strip() for c in row.strip("|").split("|")]
    old, new, ratio = float(cols[1]), float(cols[2]), float(cols[3])
    # a run takes about a millisecond: the two-decimal medians give the ratio to about 2 %
    assert old > 0 and new > 0 and ratio == pytest.approx(new / old, rel=0.03, abs=0.006)
    assert len(cols[4].split()) == 2  # one ratio per round
    assert all(" / " in c for c in cols[5:8])  # load ms, RSS, AnonHugePages for both sides
    runs = [line for line in result.stdout.splitlines() if line.startswith("round ")]
    assert len(runs) == 4  # 2 rounds x 2 sides x 1 cell
    assert all(len(line.split(": ")[1].split()) == 3 for line in runs)
    assert all("/" in r for line in runs for r in line.split(": ")[1].split())


def test_missing_popef_stops_before_timing(cache):
    result = run(cache, ROOT, ROOT, "--new-env", "TF_POPEF_MMAP_WEIGHTS=0", "--cells", "nosuchmodel:1:fp32")
    assert result.returncode != 0 and "no cached PopEF for nosuchmodel:1:fp32" in result.stderr


def test_identical_sides_are_refused(cache):
    result = run(cache, ROOT, ROOT, "--cells", "tinyconv:1:fp32")
    assert result.returncode == 2 and "same checkout under the same environment" in result.stderr
