"""The ported PopRT examples run unchanged (apart from imports) and pass their own checks."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_example(folder, script):
    cwd = os.path.join(ROOT, "examples", folder)
    proc = subprocess.run([sys.executable, script], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{script} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_dynamic_batch_size_example():
    out = run_example("dynamic_batch_size", "dynamic_batch_size.py")
    for batch in (1, 4, 7):
        assert f"Successfully run with input data in batch size {batch}" in out


def test_serving_demo_end_to_end(tmp_path):
    """`make demo`: three models fused, exported, served; every gRPC and REST answer matches
    onnxruntime (the demo asserts it) and the server exits 0 on SIGTERM."""
    cwd = os.path.join(ROOT, "examples", "serving_demo")
    proc = subprocess.run([sys.executable, "run_demo.py", "--work_dir", str(tmp_path / "work")],
                          cwd=cwd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"run_demo.py failed:\n{proc.stdout}\n{proc.stderr}"
    for name in ("adder", "concat", "classifier"):
        assert f"== model '{name}'" in proc.stdout
    assert proc.stdout.count("gRPC PredictRequest:") == 3
    assert proc.stdout.count("REST :predict:") == 3
    assert "server exited with 0" in proc.stdout
    assert proc.stdout.rstrip().endswith("all answers match the original models")
    assert os.path.isfile(tmp_path / "work" / "models" / "fused" / "1" / "saved_model.pb")
