"""SavedModel export of a single-model PopEF (serving_default only, dynamic batching) and of a
fused PopEF whose subgraphs are named by the YAML `name:` key."""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "op"))
from popef_models import compile_add_model, compile_fused_example, run_fresh  # noqa: E402

EXPORT_AND_RUN = """
import json, sys
import numpy as np, tensorflow as tf, tf_popef_op
from serving.export import export_saved_model
popef, export_dir, dynamic = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
result = export_saved_model(popef, export_dir, dynamic_batching=dynamic)
loaded = tf.saved_model.load(export_dir)
out = {"signatures": sorted(loaded.signatures.keys()), "notes": result.notes, "spec": {}, "runs": {}}
for name, fn in loaded.signatures.items():
    inputs = fn.structured_input_signature[1]
    out["spec"][name] = {"inputs": {k: [v.shape.as_list(), v.dtype.name] for k, v in inputs.items()},
                         "outputs": {k: v.shape.as_list() for k, v in fn.structured_outputs.items()}}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def add_popef(tmp_path_factory):
    return compile_add_model(str(tmp_path_factory.mktemp("add")), batch=4)


def test_single_model_gets_serving_default_with_dynamic_batching(add_popef, tmp_path):
    out = run_fresh(EXPORT_AND_RUN + """
fn = loaded.signatures["serving_default"]
bad = []
for n in range(1, 34):
    x = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
    got = fn(X=tf.constant(x), Y=tf.constant(x * 3))["O"].numpy()
    if got.shape != (n, 2) or not np.array_equal(got, x * 4):
        bad.append(n)
print(json.dumps({**out, "bad": bad}))
""", add_popef, str(tmp_path / "add" / "1"), "1")
    assert out["signatures"] == ["serving_default"]
    assert out["notes"] == []
    assert out["spec"]["serving_default"] == {"inputs": {"X": [[None, 2], "float32"], "Y": [[None, 2], "float32"]},
                                              "outputs": {"O": [None, 2]}}
    assert out["bad"] == []


def test_single_model_without_dynamic_batching_keeps_compiled_shapes(add_popef, tmp_path):
    out = run_fresh(EXPORT_AND_RUN, add_popef, str(tmp_path / "add" / "1"), "0")
    assert out["spec"]["serving_default"] == {"inputs": {"X": [[4, 2], "float32"], "Y": [[4, 2], "float32"]},
                                              "outputs": {"O": [4, 2]}}


def test_signature_names_come_from_the_yaml_name_key(tmp_path):
    popef = compile_fused_example(str(tmp_path / "named"), names=["adder", "concat"])
    out = run_fresh(EXPORT_AND_RUN + """
x = np.ones([2, 1], np.float16)
print(json.dumps({**out, "concat": loaded.signatures["concat"](X=tf.constant(x))["O"].numpy().tolist(),
                  "adder": loaded.signatures["adder"](X=tf.ones([1, 2]), Y=tf.ones([1, 2]))["O"].numpy().tolist()}))
""", popef, str(tmp_path / "out" / "1"), "1")
    assert out["signatures"] == ["adder", "concat", "serving_default"]
    assert out["spec"]["serving_default"] == out["spec"]["adder"]
    assert out["concat"] == [[1.0, 1.5, 2.0], [1.0, 1.5, 2.0]]
    assert out["adder"] == [2.0, 2.0]
    assert out["notes"] == ["subgraph 'adder' is exported with its fixed compiled shapes and batching off for its "
                            "signature: anchor 'graph0/O' has no batch axis"]  # anchors keep graph{i} names


def test_without_cross_request_batching_each_request_runs_alone_padded(add_popef, tmp_path):
    """cross_request_batching=False: same signature (any batch size), every request runs on
    whole zero-padded compiled batches of its own: with a 1.5 s packing timeout a batch-1 call
    answers at once, where the packing export waits the timeout for other requests' rows."""
    out = run_fresh("""
import json, sys, time
import numpy as np, tensorflow as tf, tf_popef_op
from concurrent.futures import ThreadPoolExecutor
from serving.export import export_saved_model
def load(export_dir, packing):
    export_saved_model(sys.argv[1], export_dir, timeout_ns=1_500_000_000,
                       cross_request_batching=packing)
    return tf.saved_model.load(export_dir).signatures["serving_default"]
def seconds(fn, n):
    x = tf.ones([n, 2])
    start = time.perf_counter()
    fn(X=x, Y=x)
    return time.perf_counter() - start
alone, packing = load(sys.argv[2] + "/alone", False), load(sys.argv[2] + "/packing", True)
bad = []
for n in [0, 1, 3, 4, 5, 9]:
    x = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
    got = alone(X=tf.constant(x), Y=tf.constant(x * 3))["O"].numpy()
    if got.shape != (n, 2) or not np.array_equal(got, x * 4):
        bad.append(n)
def one(i):   # concurrent callers each get their own rows back
    x = np.full((1, 2), i, np.float32)
    return np.array_equal(alone(X=tf.constant(x), Y=tf.constant(x))["O"].numpy(), x * 2)
with ThreadPoolExecutor(8) as pool:
    concurrent_ok = all(pool.map(one, range(64)))
spec = {k: v.shape.as_list() for k, v in alone.structured_input_signature[1].items()}
print(json.dumps({"bad": bad, "spec": spec, "concurrent_ok": concurrent_ok,
                  "alone_s": seconds(alone, 1), "packing_s": seconds(packing, 1),
                  "packing_full_s": seconds(packing, 4)}))
""", add_popef, str(tmp_path / "add"))
    assert out["spec"] == {"X": [None, 2], "Y": [None, 2]}
    assert out["bad"] == [] and out["concurrent_ok"]
    assert out["packing_s"] >= 1.4                       # waited for rows that never came
    assert out["alone_s"] < 1.0 and out["packing_full_s"] < 1.0   # full batches run at once
