"""The PopefExecute op (C++ AsyncOpKernel) called directly: results equal the runtime's,
shape inference, error codes, lazy import, one shared runner, concurrent calls meeting in the
runtime's queues. Each test runs in a fresh process (see popef_models.run_fresh)."""
import os

import pytest

from popef_models import REPO_ROOT, compile_add_model, compile_fused_example, run_fresh

OP_LIBRARY = os.path.join(REPO_ROOT, "tf_popef_op", "lib", "_popef_ops.so")


@pytest.fixture(scope="module")
def add_popef(tmp_path_factory):
    return compile_add_model(str(tmp_path_factory.mktemp("add")), batch=4)


@pytest.fixture(scope="module")
def fused_popef(tmp_path_factory):
    return compile_fused_example(str(tmp_path_factory.mktemp("fused")))


def test_library_is_built_next_to_the_runtime():
    assert os.path.exists(OP_LIBRARY), "setup.py build_ext did not build the op library"


def test_import_is_lazy_and_exposes_the_library_path():
    out = run_fresh("""
import json, sys
import tf_popef_op
path = tf_popef_op.op_library_path()
lazy = 'tensorflow' not in sys.modules
tf_popef_op.load_op_library()
print(json.dumps({"path": path, "lazy": lazy, "tf_loaded": 'tensorflow' in sys.modules,
                  "has_op": hasattr(tf_popef_op.load_op_library(), "popef_execute")}))
""")
    assert out == {"path": OP_LIBRARY, "lazy": True, "tf_loaded": True, "has_op": True}


def test_op_equals_runtime_for_batches_1_to_33(add_popef):
    out = run_fresh("""
import json, sys
import numpy as np, tensorflow as tf, tf_popef_op
from tf_popef_op.runtime import ModelRunner, RuntimeConfig, DeviceManager
path = sys.argv[1]
config = RuntimeConfig(); config.batching_dim = 0
runner = ModelRunner(path, config)
rng = np.random.default_rng(0)
mismatches = []
for n in range(1, 34):
    x = rng.standard_normal([n, 2]).astype(np.float32); y = rng.standard_normal([n, 2]).astype(np.float32)
    (got,) = tf_popef_op.popef_execute(path, [x, y], ["X", "Y"], ["O"], [tf.float32], [[None, 2]], batching_dim=0)
    want = runner.execute({"X": x, "Y": y})["O"]
    if got.shape != (n, 2) or not np.array_equal(got.numpy(), want) or not np.array_equal(want, x + y):
        mismatches.append(n)
devices = [d for d in DeviceManager().devices() if d["runners"]]
print(json.dumps({"mismatches": mismatches, "runners": sum(d["runners"] for d in devices),
                  "loads": sum(d["load_count"] for d in DeviceManager().devices()),
                  "devices": len(devices)}))
""", add_popef)
    assert out["mismatches"] == []
    # The Python runner and the op's runner: two runners, one device, one load (one DeviceManager).
    assert out == {"mismatches": [], "runners": 2, "loads": 1, "devices": 1}


def test_shape_function_static_shapes_with_unknown_batch(add_popef, fused_popef):
    out = run_fresh("""
import json, sys
import tensorflow as tf, tf_popef_op
add, fused = sys.argv[1], sys.argv[2]
shapes = {}
@tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32)] * 2)
def batched(x, y):
    return tf_popef_op.popef_execute(add, [x, y], ["X", "Y"], ["O"], [tf.float32], [[None, 2]], batching_dim=0)
shapes["batched"] = batched.get_concrete_function().structured_outputs[0].shape.as_list()
@tf.function(input_signature=[tf.TensorSpec([1, 2], tf.float32)] * 2)
def fixed(x, y):
    return tf_popef_op.popef_execute(fused, [x, y], ["graph0/X", "graph0/Y"], ["graph0/O"], [tf.float32], [[2]],
                                     batching_dim=0, index=0)
shapes["fixed"] = fixed.get_concrete_function().structured_outputs[0].shape.as_list()
try:
    @tf.function(input_signature=[tf.TensorSpec([4, 2], tf.float32)] * 2)
    def bad(x, y):
        return tf_popef_op.popef_execute(add, [x, y], ["X", "Y"], ["O"], [tf.float32], [[None, 2]])
    bad.get_concrete_function()
    shapes["unbatched_unknown"] = "accepted"
except (ValueError, tf.errors.InvalidArgumentError) as e:
    shapes["unbatched_unknown"] = str(e)
print(json.dumps(shapes))
""", add_popef, fused_popef)
    assert out["batched"] == [None, 2]
    assert out["fixed"] == [2]
    assert "batching_dim is off" in out["unbatched_unknown"] and "'O'" in out["unbatched_unknown"]


def test_errors_have_tf_codes_and_name_the_anchor(add_popef, fused_popef):
    out = run_fresh("""
import json, sys
import numpy as np, tensorflow as tf, tf_popef_op
add, fused = sys.argv[1], sys.argv[2]
f32 = lambda *s: np.ones(s, np.float32)
cases = {
  "dtype": (add, [f32(4, 2), np.ones([4, 2], np.float64)], ["X", "Y"], ["O"], [tf.float32], [[4, 2]], -1, -1),
  "shape": (add, [f32(4, 3), f32(4, 3)], ["X", "Y"], ["O"], [tf.float32], [[4, 2]], -1, -1),
  "batch_multiple": (add, [f32(3, 2), f32(3, 2)], ["X", "Y"], ["O"], [tf.float32], [[4, 2]], -1, -1),
  "missing_input": (add, [f32(4, 2)], ["X"], ["O"], [tf.float32], [[4, 2]], -1, -1),
  "unknown_anchor": (add, [f32(4, 2), f32(4, 2)], ["X", "Z"], ["O"], [tf.float32], [[4, 2]], -1, -1),
  "index_range": (fused, [np.ones([1, 1], np.float16)], ["graph1/X"], ["graph1/O"], [tf.float16], [[1, 3]], -1, 7),
  "index_on_single": (add, [f32(4, 2), f32(4, 2)], ["X", "Y"], ["O"], [tf.float32], [[4, 2]], -1, 0),
  "no_index_on_fused": (fused, [np.ones([1, 1], np.float16)], ["graph1/X"], ["graph1/O"], [tf.float16], [[1, 3]], -1, -1),
  "wrong_subgraph": (fused, [np.ones([1, 1], np.float16)], ["graph1/X"], ["graph1/O"], [tf.float16], [[1, 3]], -1, 0),
  "undeclared_shape": (add, [f32(8, 2), f32(8, 2)], ["X", "Y"], ["O"], [tf.float32], [[4, 2]], -1, -1),
  "missing_popef": (add + ".missing", [f32(4, 2), f32(4, 2)], ["X", "Y"], ["O"], [tf.float32], [[4, 2]], -1, -1),
}
out = {}
for name, (path, inputs, names, outs, dtypes, shapes, bdim, index) in cases.items():
    try:
        tf_popef_op.popef_execute(path, inputs, names, outs, dtypes, shapes, batching_dim=bdim, index=index)
        out[name] = ["OK", ""]
    except tf.errors.OpError as e:
        out[name] = [type(e).__name__, e.message]
print(json.dumps(out))
""", add_popef, fused_popef)
    expect = {
        "dtype": ("InvalidArgumentError", ["'Y'", "float32", "float64"]),
        "shape": ("InvalidArgumentError", ["'X'", "[4, 2]", "[4, 3]"]),
        "batch_multiple": ("InvalidArgumentError", ["'X'", "not a multiple of the compiled batch size 4"]),
        "missing_input": ("InvalidArgumentError", ["missing input 'Y'"]),
        "unknown_anchor": ("InvalidArgumentError", ["'Z'"]),
        "index_range": ("InvalidArgumentError", ["index 7 out of range"]),
        "index_on_single": ("InvalidArgumentError", ["single-model PopEF"]),
        "no_index_on_fused": ("InvalidArgumentError", ["missing input 'index'"]),
        "wrong_subgraph": ("InvalidArgumentError", ["'graph1/stream0'", "not anchors of this subgraph"]),
        "undeclared_shape": ("InvalidArgumentError", ["output 'O' has shape [8, 2]", "output_shapes says [4,2]"]),
        "missing_popef": ("NotFoundError", ["PopEF file not found"]),
    }
    for case, (error, fragments) in expect.items():
        got_error, message = out[case]
        assert got_error == error, (case, out[case])
        for fragment in fragments:
            assert fragment in message, (case, fragment, message)


def test_incompatible_ipu_version_is_failed_precondition(add_popef):
    # The PopEF is compiled for ipu2; a process whose only device is an ipu21 cannot run it.
    out = run_fresh("""
import json, sys
import numpy as np, tensorflow as tf, tf_popef_op
x = np.ones([4, 2], np.float32)
try:
    tf_popef_op.popef_execute(sys.argv[1], [x, x], ["X", "Y"], ["O"], [tf.float32], [[4, 2]])
    print(json.dumps(["OK", ""]))
except tf.errors.OpError as e:
    print(json.dumps([type(e).__name__, e.message]))
""", add_popef, env={"TF_POPEF_DEVICES": "ipu21:1"})
    assert out[0] == "FailedPreconditionError"
    assert "ipu2" in out[1] and "ipu21" in out[1]


def test_concurrent_calls_share_one_runner_and_batch_together(add_popef):
    # 4 threads each send one row with a 5 s batching timeout. The kernel is asynchronous, so all
    # 4 rows reach the runner's queues together and fill one compiled batch of 4 at once; a
    # blocking kernel (or one runner per call) would wait out the timeout.
    out = run_fresh("""
import json, sys, threading, time
import numpy as np, tensorflow as tf, tf_popef_op
from tf_popef_op.runtime import DeviceManager
path = sys.argv[1]
def call(x):
    return tf_popef_op.popef_execute(path, [x, x], ["X", "Y"], ["O"], [tf.float32], [[None, 2]],
                                     batching_dim=0, timeout_ns=5_000_000_000)[0].numpy()
call(np.ones([4, 2], np.float32))  # loads the runner (a full batch: no waiting)
results, errors = {}, []
def worker(i):
    try:
        x = np.full([1, 2], i, np.float32)
        results[i] = call(x).tolist() == (x + x).tolist()
    except Exception as e:
        errors.append(repr(e))
threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
start = time.perf_counter()
for t in threads: t.start()
for t in threads: t.join()
elapsed = time.perf_counter() - start
devices = DeviceManager().devices()
print(json.dumps({"ok": sorted(results.items()), "errors": errors, "elapsed": elapsed,
                  "runners": sum(d["runners"] for d in devices), "loads": sum(d["load_count"] for d in devices)}))
""", add_popef)
    assert out["errors"] == []
    assert out["ok"] == [[i, True] for i in range(4)]
    assert out["runners"] == 1 and out["loads"] == 1
    assert out["elapsed"] < 2.5, f"4 concurrent single-row calls took {out['elapsed']:.2f} s: not batched together"
