"""Builds tests/runtime/cc/runtime_core_test.cc against the installed runtime library and runs it:
ring buffer and queue blocking, a kernel failing at run time (it fails every request of its
batch; the runner keeps serving), and per-request timing (queue time includes the wait for a
batch to fill; a shared batch's requests share its compute times)."""
import subprocess

from popef_builders import add_model
from runtime_test_programs import build_test_program


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
    binary = build_test_program("runtime_core_test.cc", tmp_path / "runtime_core_test")
    popef = fail_if_negative_model().write(tmp_path / "fail_if_negative.popef")
    out = subprocess.run([str(binary), popef], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "all runtime core tests passed" in out.stdout
