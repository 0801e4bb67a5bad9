"""PopEFs the op and export tests run (compiled with the project's compiler), and a way to run a
script in a fresh Python process (TF, the op library and the runtime's DeviceManager are
per-process, so the tests that count loads or compare loaders each get their own process)."""
import json
import os
import subprocess
import sys
from typing import Optional, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO_ROOT, "examples", "model_fusion"))
from compile import create_model0, create_model1  # noqa: E402  (the seeds' fusion models)

from compiler import Compiler  # noqa: E402


def compile_fused_example(folder: str, names: Optional[Sequence[str]] = None) -> str:
    """The seeds' model fusion example (model0 fp32 Add+Reshape, model1 fp16 Concat) fused into
    folder/executable.popef; `names` gives the subgraphs' YAML `name:` keys."""
    os.makedirs(folder, exist_ok=True)
    paths = []
    for i, model in enumerate((create_model0(11), create_model1(11))):
        paths.append(os.path.join(folder, f"model{i}.onnx"))
        onnx.save(model, paths[-1])
    entries = [{"input_model": paths[0], "input_shape": ["X=1,2", "Y=1,2"], "precision": "fp32"},
               {"input_model": paths[1], "input_shape": ["X=1,1"], "precision": "fp16"}]
    if names:
        for entry, name in zip(entries, names):
            entry["name"] = name
    out = os.path.join(folder, "executable.popef")
    Compiler.compile_fused(entries).save(out)
    return out


def compile_add_model(folder: str, batch: int = 4) -> str:
    """The seeds' dynamic batch size model: O = X + Y, float32, compiled at [batch, 2]."""
    os.makedirs(folder, exist_ok=True)
    graph = helper.make_graph(
        [helper.make_node("Add", ["X", "Y"], ["O"])], "add",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, (batch, 2)),
         helper.make_tensor_value_info("Y", TensorProto.FLOAT, (batch, 2))],
        [helper.make_tensor_value_info("O", TensorProto.FLOAT, (batch, 2))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    out = os.path.join(folder, "add.popef")
    Compiler.compile(model.SerializeToString(), ["O"]).save(out)
    return out


def run_fresh(script: str, *args: str, env: Optional[dict] = None, timeout: int = 300) -> dict:
    """Runs `script` in a fresh interpreter (repo on sys.path, argv = args) and returns the JSON
    object it prints on its last stdout line; fails the test with its output otherwise."""
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO_ROOT, os.environ.get("PYTHONPATH", "")]),
                    TF_CPP_MIN_LOG_LEVEL="2")
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=REPO_ROOT)
    assert proc.returncode == 0, f"fresh process failed (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    lines = proc.stdout.strip().splitlines()
    assert lines, f"fresh process printed nothing:\n{proc.stderr}"
    return json.loads(lines[-1])


def export_fresh(popef_path: str, export_dir: str) -> str:
    """serving.export's SavedModel of `popef_path` in export_dir, written by a fresh process (so
    the caller's process need not import TensorFlow)."""
    run_fresh("""
import json, sys
from serving.export import export_saved_model
export_saved_model(sys.argv[1], sys.argv[2])
print(json.dumps({}))
""", popef_path, export_dir)
    return export_dir


def expected_fused(index: int, x: np.ndarray, y: Optional[np.ndarray] = None) -> np.ndarray:
    """The seeds' models in numpy: model0 = reshape(X + Y, (2,)), model1 = concat(X, [[1.5, 2]])."""
    if index == 0:
        return (x + y).reshape(2)
    return np.concatenate([x, np.tile(np.array([[1.5, 2.0]], np.float16), (x.shape[0], 1))], axis=1)
