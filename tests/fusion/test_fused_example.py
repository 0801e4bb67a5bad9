"""examples/model_fusion (PopRT's tutorial) runs unchanged: compile.py then run.py. Run in a copy
of the folder so the generated models and PopEF do not land in the source tree."""
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run(script, cwd):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, script], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{script} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def test_model_fusion_example(tmp_path):
    folder = tmp_path / "model_fusion"
    shutil.copytree(os.path.join(ROOT, "examples", "model_fusion"), folder,
                    ignore=shutil.ignore_patterns("*.onnx", "*.popef"))
    out = run("compile.py", str(folder))
    assert "fused 2 model(s)" in out and os.path.isfile(folder / "executable.popef")
    run("run.py", str(folder))  # asserts [3, 3] and [[0, 1.5, 2]] itself
