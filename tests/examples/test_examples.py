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
