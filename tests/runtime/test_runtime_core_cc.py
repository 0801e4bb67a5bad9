"""Builds tests/runtime/cc/runtime_core_test.cc against the installed runtime library and runs it:
ring buffer and queue blocking, and a kernel failing at run time (it fails every request of its
batch; the runner keeps serving)."""
import os
import subprocess

import nlohmann_json
import scipy_openblas32

import tf_popef_op
from popef_builders import add_model

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.dirname(os.path.abspath(tf_popef_op.__file__))
REPO_ROOT = os.path.dirname(PACKAGE)


def fail_if_negative_model():
    """O = TestFailIfNegative(X), X/O [4, 2]; the op is registered by the test program only."""
    model = add_model()
    model.metadata["anchors"] = [a for a in model.metadata["anchors"] if a["name"] != "Y"]
    ex = model.executable
    ex["tensors"] = [t for t in ex["tensors"] if t["name"] != "Y"]
    ex["programs"]["main"] = [{"op": "TestFailIfNegative", "name": "guard", "inputs": [0], "outputs": [2],
                               "attrs": {}}]
    ex["subgraphs"][0]["inputs"] = ["X"]
    return model


def test_runtime_core_cc(tmp_path):
    binary = tmp_path / "runtime_core_test"
    lib = os.path.join(PACKAGE, "lib")
    subprocess.run(["g++", "-std=c++17", "-O1", "-Wall", "-pthread",
                    f"-I{REPO_ROOT}", f"-I{nlohmann_json.get_include()}", f"-I{scipy_openblas32.get_include_dir()}",
                    os.path.join(HERE, "cc", "runtime_core_test.cc"), "-o", str(binary),
                    f"-L{lib}", "-ltfpopef_runtime", f"-Wl,-rpath,{lib}"],
                   check=True, timeout=600)
    popef = fail_if_negative_model().write(tmp_path / "fail_if_negative.popef")
    out = subprocess.run([str(binary), popef], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "all runtime core tests passed" in out.stdout
