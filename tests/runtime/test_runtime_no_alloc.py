"""Builds tests/runtime/cc/no_alloc_test.cc (a program whose global operator new and malloc count
allocations) against the runtime library and runs it: steady-state ModelRunner::Execute calls
(zero-copy, runner-allocated outputs, staged batches, profiling on, a fused executable's Switch)
must allocate nothing on any thread."""
import os
import subprocess

import nlohmann_json
import numpy as np
import scipy_openblas32

import tf_popef_op
from popef_builders import fused_model, weight_model

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.dirname(os.path.abspath(tf_popef_op.__file__))
REPO_ROOT = os.path.dirname(PACKAGE)


def test_execute_path_allocates_nothing(tmp_path):
    binary = tmp_path / "no_alloc_test"
    lib = os.path.join(PACKAGE, "lib")
    subprocess.run(["g++", "-std=c++17", "-O1", "-Wall", "-pthread",
                    f"-I{REPO_ROOT}", f"-I{nlohmann_json.get_include()}", f"-I{scipy_openblas32.get_include_dir()}",
                    os.path.join(HERE, "cc", "no_alloc_test.cc"), "-o", str(binary),
                    f"-L{lib}", "-ltfpopef_runtime", f"-Wl,-rpath,{lib}"],
                   check=True, timeout=600)
    weight = (0.5 * np.arange(1, 9, dtype=np.float32)).reshape(4, 2)  # the values the C++ test expects
    weights = weight_model(weight).write(tmp_path / "weight.popef")
    fused = fused_model().write(tmp_path / "fused.popef")
    out = subprocess.run([str(binary), weights, fused], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no allocation on the execute path" in out.stdout
    # Every scenario ran and reported its (zero) count.
    assert out.stdout.count(": 0 allocations in 2000 executes") == 5, out.stdout
