"""Builds tests/runtime/cc/no_alloc_test.cc (a program whose global operator new and malloc count
allocations) against the runtime library and runs it: steady-state ModelRunner::Execute calls
(zero-copy, runner-allocated outputs, staged batches, profiling on, a fused executable's Switch)
must allocate nothing on any thread."""
import subprocess

import numpy as np

from popef_builders import fused_model, weight_model
from runtime_test_programs import build_test_program


def test_execute_path_allocates_nothing(tmp_path):
    binary = build_test_program("no_alloc_test.cc", tmp_path / "no_alloc_test")
    weight = (0.5 * np.arange(1, 9, dtype=np.float32)).reshape(4, 2)  # the values the C++ test expects
    weights = weight_model(weight).write(tmp_path / "weight.popef")
    fused = fused_model().write(tmp_path / "fused.popef")
    out = subprocess.run([str(binary), weights, fused], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no allocation on the execute path" in out.stdout
    # Every scenario ran and reported its (zero) count.
    assert out.stdout.count(": 0 allocations in 2000 executes") == 5, out.stdout
