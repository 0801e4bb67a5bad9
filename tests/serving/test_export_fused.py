"""SavedModel export of the seeds' fused example, served through the PopefExecute op in fresh
processes: every signature from the TF2 and TF1 loaders equals the runtime's result, a moved
SavedModel still works, dynamic batching, 32 concurrent threads, one shared executable."""
import os
import shutil
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "op"))
from popef_models import REPO_ROOT, compile_fused_example, run_fresh  # noqa: E402

# Feeds the signatures and the runtime the same inputs; prints the outputs of both.
COMPARE_WITH_RUNTIME = """
import json, sys
import numpy as np, tensorflow as tf, tf_popef_op
from tf_popef_op.runtime import ModelRunner, RuntimeConfig, DeviceManager
export_dir, popef = sys.argv[1], sys.argv[2]
tf_popef_op.load_op_library()
rng = np.random.default_rng(1)
feeds = {
    "graph0": {"X": rng.standard_normal([1, 2]).astype(np.float32), "Y": rng.standard_normal([1, 2]).astype(np.float32)},
    "graph1": {"X": rng.standard_normal([5, 1]).astype(np.float16)},
}
feeds["serving_default"] = feeds["graph0"]
config = RuntimeConfig(); config.batching_dim = 0; config.validate_io_params = False
runner = ModelRunner(popef, config)
expected = {}
for name, index in (("graph0", 0), ("graph1", 1), ("serving_default", 0)):
    anchors = {f"graph{index}/{k}": v for k, v in feeds[name].items()}
    anchors["index"] = np.array([index], np.int32)
    expected[name] = runner.execute(anchors)[f"graph{index}/O"].tolist()

result = {"expected": expected, "tf2": {}, "tf1": {}}
loaded = tf.saved_model.load(export_dir)
result["signatures"] = sorted(loaded.signatures.keys())
for name, fn in loaded.signatures.items():
    out = fn(**{k: tf.constant(v) for k, v in feeds[name].items()})
    result["tf2"][name] = {k: v.numpy().tolist() for k, v in out.items()}
    result.setdefault("spec", {})[name] = {
        "inputs": {k: v.shape.as_list() for k, v in fn.structured_input_signature[1].items()},
        "outputs": {k: v.shape.as_list() for k, v in fn.structured_outputs.items()}}
with tf.compat.v1.Session(graph=tf.Graph()) as sess:
    meta = tf.compat.v1.saved_model.loader.load(sess, ["serve"], export_dir)
    for name in ("graph0", "graph1", "serving_default"):
        sig = meta.signature_def[name]
        got = sess.run({k: v.name for k, v in sig.outputs.items()},
                       {sig.inputs[k].name: v for k, v in feeds[name].items()})
        result["tf1"][name] = {k: v.tolist() for k, v in got.items()}
devices = DeviceManager().devices()
result["runners"] = sum(d["runners"] for d in devices)
result["loads"] = sum(d["load_count"] for d in devices)
result["reloads"] = sum(d["reload_count"] for d in devices)
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def fused_popef(tmp_path_factory):
    return compile_fused_example(str(tmp_path_factory.mktemp("fused")))


@pytest.fixture(scope="module")
def export_dir(fused_popef, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("models") / "fused" / "1")
    proc = subprocess.run([sys.executable, "-m", "serving.export", fused_popef, out], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The CLI says which subgraph keeps fixed shapes and why.
    assert ("subgraph 'graph0' is exported with its fixed compiled shapes and batching off for its signature: "
            "anchor 'graph0/O' has no batch axis") in proc.stdout
    assert "signature 'graph1' (subgraph graph1): (X: float16[None, 1]) -> (O: float16[None, 3])" in proc.stdout
    return out


def test_export_layout(export_dir):
    assert sorted(os.listdir(os.path.join(export_dir, "assets"))) == ["executable.popef"]
    assert os.path.exists(os.path.join(export_dir, "saved_model.pb"))


def test_signatures_equal_the_runtime_in_both_loaders(export_dir, fused_popef):
    out = run_fresh(COMPARE_WITH_RUNTIME, export_dir, fused_popef)
    assert out["signatures"] == ["graph0", "graph1", "serving_default"]
    for name in ("graph0", "graph1", "serving_default"):
        assert out["tf2"][name] == {"O": out["expected"][name]}, name
        assert out["tf1"][name] == {"O": out["expected"][name]}, name
    # Keys are the original models' names; graph0 keeps fixed shapes, graph1 is batched.
    assert out["spec"]["graph0"] == {"inputs": {"X": [1, 2], "Y": [1, 2]}, "outputs": {"O": [2]}}
    assert out["spec"]["serving_default"] == out["spec"]["graph0"]
    assert out["spec"]["graph1"] == {"inputs": {"X": [None, 1]}, "outputs": {"O": [None, 3]}}
    # Three signatures and two loaders, one runner: the Python runner above is the other one,
    # and both sit on one device that loaded the executable once.
    assert out["runners"] == 2 and out["loads"] == 1 and out["reloads"] == 0


def test_moved_savedmodel_still_works(export_dir, fused_popef, tmp_path):
    moved = str(tmp_path / "elsewhere" / "7")
    shutil.copytree(export_dir, moved)
    popef_copy = str(tmp_path / "reference.popef")
    shutil.copy(fused_popef, popef_copy)
    out = run_fresh(COMPARE_WITH_RUNTIME, moved, popef_copy)
    for name in ("graph0", "graph1"):
        assert out["tf2"][name] == {"O": out["expected"][name]}
        assert out["tf1"][name] == {"O": out["expected"][name]}


def test_dynamic_batches_threads_and_one_shared_executable(export_dir):
    out = run_fresh("""
import json, sys, threading
import numpy as np, tensorflow as tf, tf_popef_op
from tf_popef_op.runtime import DeviceManager
tf_popef_op.load_op_library()
loaded = tf.saved_model.load(sys.argv[1])
g0, g1 = loaded.signatures["graph0"], loaded.signatures["graph1"]
const = np.array([1.5, 2.0], np.float16)
def want1(x):
    return np.concatenate([x, np.tile(const, (x.shape[0], 1))], axis=1)
bad_batches = []
for n in range(1, 34):
    x = np.arange(n, dtype=np.float16).reshape(n, 1)
    got = g1(X=tf.constant(x))["O"].numpy()
    if got.shape != (n, 3) or not np.array_equal(got, want1(x)):
        bad_batches.append(n)
failures, errors = [], []
def worker(i):
    try:
        for k in range(8):
            if (i + k) % 2:
                x = np.full([1 + (i % 5), 1], i, np.float16)
                got = g1(X=tf.constant(x))["O"].numpy()
                ok = np.array_equal(got, want1(x))
            else:
                x = np.full([1, 2], i, np.float32); y = np.full([1, 2], k, np.float32)
                got = g0(X=tf.constant(x), Y=tf.constant(y))["O"].numpy()
                ok = np.array_equal(got, (x + y).reshape(2))
            if not ok:
                failures.append((i, k))
    except Exception as e:
        errors.append(repr(e))
threads = [threading.Thread(target=worker, args=(i,)) for i in range(32)]
for t in threads: t.start()
for t in threads: t.join()
devices = DeviceManager().devices()
print(json.dumps({"bad_batches": bad_batches, "failures": failures, "errors": errors[:3],
                  "runners": sum(d["runners"] for d in devices), "loads": sum(d["load_count"] for d in devices),
                  "reloads": sum(d["reload_count"] for d in devices)}))
""", export_dir)
    assert out["bad_batches"] == []
    assert out["errors"] == [] and out["failures"] == []
    # Both signatures, 32 threads: one runner, the executable loaded once, never reloaded.
    assert (out["runners"], out["loads"], out["reloads"]) == (1, 1, 0)


def test_bad_requests_give_tf_errors(export_dir):
    out = run_fresh("""
import json, sys
import numpy as np, tensorflow as tf, tf_popef_op
tf_popef_op.load_op_library()
export_dir = sys.argv[1]
result = {}
with tf.compat.v1.Session(graph=tf.Graph()) as sess:
    meta = tf.compat.v1.saved_model.loader.load(sess, ["serve"], export_dir)
    sig = meta.signature_def["graph1"]
    out = sig.outputs["O"].name
    def run(name, feed):
        try:
            sess.run(out, feed)
            result[name] = ["OK", ""]
        except tf.errors.OpError as e:
            result[name] = [type(e).__name__, e.message]
        except ValueError as e:  # the client checks fed shapes against the placeholder
            result[name] = ["ValueError", str(e)]
    run("missing", {})
    run("shape", {sig.inputs["X"].name: np.ones([2, 3], np.float16)})
    # Bypass the signature's placeholder: feed the op's input tensor itself with a wrong shape.
    op = [o for o in sess.graph.get_operations() if o.type == "PopefExecute"]
    result["ops"] = len(op)
loaded = tf.saved_model.load(export_dir)
fn = loaded.signatures["graph1"]
try:
    fn(X=tf.ones([2, 1], tf.float32))
    result["dtype_tf2"] = ["OK", ""]
except (tf.errors.OpError, TypeError, ValueError) as e:
    result["dtype_tf2"] = [type(e).__name__, str(e)]
print(json.dumps(result))
""", export_dir)
    assert out["missing"][0] == "InvalidArgumentError" and "graph1_X" in out["missing"][1]
    assert out["shape"][0] == "ValueError" and "(2, 3)" in out["shape"][1]
    assert out["dtype_tf2"][0] in ("InvalidArgumentError", "TypeError", "ValueError")
    assert "float" in out["dtype_tf2"][1]


def test_export_refuses_a_non_empty_directory_and_a_missing_popef(export_dir, tmp_path):
    import serving.export as export
    with pytest.raises(FileExistsError, match="not empty"):
        export.export_saved_model(os.path.join(export_dir, "assets", "executable.popef"), export_dir)
    with pytest.raises(FileNotFoundError, match="PopEF file not found"):
        export.export_saved_model(str(tmp_path / "none.popef"), str(tmp_path / "out"))
