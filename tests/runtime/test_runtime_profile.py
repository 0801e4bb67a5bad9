"""The per-op profiler: RuntimeConfig.profile / TF_POPEF_PROFILE / ModelRunner.profiling, the
entries of ModelRunner.profile() and profile_summary(), reset, fused programs, the report helpers
and the benchmarks/profile_model.py CLI."""
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import tf_popef_op
from popef_builders import fused_model, weight_model
from tf_popef_op import runtime

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(tf_popef_op.__file__)))


def weights():
    return (0.5 * np.arange(1, 9, dtype=np.float32)).reshape(4, 2)


def test_profile_entries_and_summary():
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(8, 2)
    with runtime.ModelRunner(weight_model(weights()), runtime.RuntimeConfig(profile=True)) as runner:
        assert runner.profiling
        for _ in range(3):
            out = runner.execute({"X": x})["O"]
        np.testing.assert_allclose(out, (x + np.tile(weights(), (2, 1))) * x, rtol=1e-6)
        entries = runner.profile()
        assert [(e["program"], e["step"], e["op"], e["node"], e["calls"]) for e in entries] == [
            ("main", 0, "Add", "add", 6), ("main", 1, "Mul", "mul", 6)]  # 3 requests x 2 batches
        for e in entries:
            assert e["total_us"] > 0
            assert e["mean_us"] == pytest.approx(e["total_us"] / e["calls"])
        summary = runner.profile_summary()
        assert summary["runs"] == 6 and summary["kernel_calls"] == 12
        assert summary["kernel_us"] == pytest.approx(sum(e["total_us"] for e in entries))
        assert summary["run_us"] >= summary["kernel_us"]
        assert summary["dispatch_us"] == pytest.approx(summary["run_us"] - summary["kernel_us"])

        runner.reset_profile()
        assert runner.profile() == []
        assert runner.profile_summary()["runs"] == 0
        runner.execute({"X": x[:4]})
        assert [e["calls"] for e in runner.profile()] == [1, 1]


def test_profiling_off_records_nothing_and_can_be_switched():
    with runtime.ModelRunner(weight_model(weights()), runtime.RuntimeConfig(profile=False)) as runner:
        assert not runner.profiling
        runner.execute({"X": np.ones((4, 2), np.float32)})
        assert runner.profile() == [] and runner.profile_summary()["runs"] == 0
        runner.profiling = True
        runner.execute({"X": np.ones((4, 2), np.float32)})
        assert [e["calls"] for e in runner.profile()] == [1, 1]
        runner.profiling = False
        runner.execute({"X": np.ones((4, 2), np.float32)})
        assert [e["calls"] for e in runner.profile()] == [1, 1]  # kept, not extended


@pytest.mark.parametrize("value,expected", [("1", True), ("yes", True), ("0", False), ("", False)])
def test_profile_default_from_environment(monkeypatch, value, expected):
    monkeypatch.setenv("TF_POPEF_PROFILE", value)
    assert runtime.RuntimeConfig().profile is expected
    monkeypatch.delenv("TF_POPEF_PROFILE")
    assert runtime.RuntimeConfig().profile is False
    assert runtime.RuntimeConfig(profile=True).profile is True


def test_profile_of_a_fused_executable_names_the_subgraph_programs():
    x0, x1 = np.ones((4, 2), np.float32), np.ones((2, 3), np.float32)
    with runtime.ModelRunner(fused_model(), runtime.RuntimeConfig(profile=True)) as runner:
        runner.execute({"index": np.array([0], np.int32), "graph0/X": x0, "graph0/Y": x0})
        runner.execute({"index": np.array([1], np.int32), "graph1/X": x1, "graph1/Y": x1})
        runner.execute({"index": np.array([1], np.int32), "graph1/X": x1, "graph1/Y": x1})
        assert [(e["program"], e["node"], e["calls"]) for e in runner.profile()] == [
            ("graph0", "graph0/add", 1), ("graph1", "graph1/add", 2), ("graph1", "graph1/mul", 2)]
        assert runner.profile_summary()["runs"] == 3


def test_format_profile_and_profile_by_op():
    entries = [{"program": "main", "step": 0, "op": "Add", "node": "a0", "calls": 2, "total_us": 6.0, "mean_us": 3.0},
               {"program": "main", "step": 1, "op": "Relu", "node": "r", "calls": 2, "total_us": 2.0, "mean_us": 1.0},
               {"program": "main", "step": 2, "op": "Add", "node": "a1", "calls": 2, "total_us": 10.0, "mean_us": 5.0}]
    by_op = runtime.profile_by_op(entries)
    assert [(r["op"], r["steps"], r["calls"], r["total_us"], r["mean_us"]) for r in by_op] == [
        ("Add", 2, 4, 16.0, 4.0), ("Relu", 1, 2, 2.0, 1.0)]
    summary = {"runs": 2, "run_us": 20.0, "kernel_us": 18.0, "kernel_calls": 6, "dispatch_us": 2.0}
    text = runtime.format_profile(entries, summary, top=2)
    lines = text.splitlines()
    assert lines[0] == "per step (2 of 3 by total time, 2 run(s)):"
    assert lines[2].split()[:2] == ["Add", "a1"] and lines[3].split()[:2] == ["Add", "a0"]
    assert "r " not in "\n".join(lines[2:4])  # the cheapest step is cut by top=2
    assert "per op type:" in text
    assert lines[-1] == "per run: 10.00 us total, 9.00 us in 3 kernel call(s), 1.00 us dispatch (333 ns per call)"


def run_cli(*args):
    out = subprocess.run([sys.executable, os.path.join(REPO_ROOT, "benchmarks", "profile_model.py"), *args],
                         capture_output=True, text=True, timeout=600, cwd=REPO_ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_profile_model_cli_on_a_popef(tmp_path):
    path = weight_model(weights()).write(tmp_path / "weights.popef")
    text = run_cli(path, "--iters", "5", "--json", str(tmp_path / "p.json"))
    assert "5 runs" in text and "per op type:" in text
    assert any(line.split()[:2] == ["Add", "add"] for line in text.splitlines())
    assert "per run:" in text
    import json
    data = json.loads((tmp_path / "p.json").read_text())
    assert [e["calls"] for e in data["entries"]] == [5, 5] and data["summary"]["runs"] == 5


def test_profile_model_cli_compiles_onnx(tmp_path):
    w = numpy_helper_array((16, 8))
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["h"], name="matmul"), helper.make_node("Relu", ["h"], ["Y"], name="relu")],
        "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 8])],
        [onnx.numpy_helper.from_array(w, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "mlp.onnx"
    onnx.save(model, str(path))
    text = run_cli(str(path), "--iters", "3", "--batch", "2")
    assert "3 runs" in text and "per op type:" in text and "per run:" in text


def numpy_helper_array(shape):
    return np.random.default_rng(0).standard_normal(shape).astype(np.float32)
