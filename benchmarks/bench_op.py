"""Latency the PopefExecute op adds to a SavedModel signature call.

Three ways to compute O = X + Y on a [4, 2] float32 request, measured interleaved (round-robin,
one call each per round) so they see the same machine noise:
  runner     ModelRunner.execute from Python: the emulator runtime's own time (+ pybind11)
  identity   a SavedModel signature returning X + Y in TensorFlow: TF's per-call floor
  popef      the exported PopEF SavedModel signature: TF + PopefExecute + the runtime
for the TF2 loader (`loaded.signatures[...]`) and the TF1 loader + Session.run (the path
tensorflow_model_server takes). popef - identity is what the op and the runtime add over
TF's floor; the op's own added latency is that minus the runtime's time (runner), which also
counts pybind11's conversions, so the estimate is conservative in the op's favour only by
those few microseconds.

    .venv/bin/python benchmarks/bench_op.py [--iters 2000] [--batch 4]
"""
import argparse
import os
import platform
import statistics
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "op"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402

import tf_popef_op  # noqa: E402
from popef_models import compile_add_model  # noqa: E402
from serving.export import export_saved_model  # noqa: E402
from tf_popef_op.runtime import ModelRunner, RuntimeConfig  # noqa: E402


def identity_savedmodel(path: str, batch: int):
    module = tf.Module()
    spec = tf.TensorSpec([batch, 2], tf.float32)

    @tf.function(input_signature=[spec, spec])
    def add(X, Y):  # noqa: N803 (signature keys)
        return {"O": X + Y}
    tf.saved_model.save(module, path, signatures={"serving_default": add})


def tf1_caller(export_dir: str, feeds):
    graph = tf.Graph()
    sess = tf.compat.v1.Session(graph=graph)
    meta = tf.compat.v1.saved_model.loader.load(sess, ["serve"], export_dir)
    sig = meta.signature_def["serving_default"]
    fetch = sig.outputs["O"].name
    feed = {sig.inputs[k].name: v for k, v in feeds.items()}
    callable_fn = sess.make_callable(fetch, feed_list=list(feed.keys()))
    values = list(feed.values())
    return lambda: callable_fn(*values)


def measure(callers, iters):
    for fn in callers.values():  # warm up (loads, graph optimization)
        for _ in range(20):
            fn()
    samples = {name: [] for name in callers}
    for _ in range(iters):
        for name, fn in callers.items():
            t0 = time.perf_counter()
            fn()
            samples[name].append(time.perf_counter() - t0)
    return {name: (statistics.median(s) * 1e3, float(np.percentile(s, 90)) * 1e3) for name, s in samples.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=4)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench_op_")
    popef = compile_add_model(os.path.join(tmp, "add"), batch=args.batch)
    export_saved_model(popef, os.path.join(tmp, "popef_model"), dynamic_batching=False)
    identity_savedmodel(os.path.join(tmp, "identity_model"), args.batch)

    x = np.random.default_rng(0).standard_normal([args.batch, 2]).astype(np.float32)
    feeds = {"X": x, "Y": x}
    runner = ModelRunner(popef, RuntimeConfig())
    out = {"O": np.empty_like(x)}
    tf_popef_op.load_op_library()
    popef_fn = tf.saved_model.load(os.path.join(tmp, "popef_model")).signatures["serving_default"]
    identity_fn = tf.saved_model.load(os.path.join(tmp, "identity_model")).signatures["serving_default"]
    tx, ty = tf.constant(x), tf.constant(x)
    callers = {
        "runner": lambda: runner.execute(feeds, out),
        "tf2 identity": lambda: identity_fn(X=tx, Y=ty),
        "tf2 popef": lambda: popef_fn(X=tx, Y=ty),
        "tf1 identity": tf1_caller(os.path.join(tmp, "identity_model"), feeds),
        "tf1 popef": tf1_caller(os.path.join(tmp, "popef_model"), feeds),
    }
    assert np.array_equal(callers["tf1 popef"](), x + x) and np.array_equal(popef_fn(X=tx, Y=ty)["O"].numpy(), x + x)
    results = measure(callers, args.iters)

    print(f"# bench_op: O = X + Y, batch {args.batch}, {args.iters} interleaved rounds, TF {tf.__version__}, "
          f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    print("| call | median ms | p90 ms |")
    print("|---|---:|---:|")
    for name, (median, p90) in results.items():
        print(f"| {name} | {median:.3f} | {p90:.3f} |")
    runner_us = results["runner"][0] * 1e3
    for loader in ("tf2", "tf1"):
        over_floor = (results[f"{loader} popef"][0] - results[f"{loader} identity"][0]) * 1e3
        print(f"{loader}: popef - identity = {over_floor:.0f} us (op + runtime over TF's floor, median); "
              f"the runtime alone from Python: {runner_us:.0f} us; "
              f"op added latency beyond the runtime's time = {over_floor - runner_us:.0f} us (target <= 100 us)")


if __name__ == "__main__":
    main()
