"""Caller threads hitting different subgraphs of one fused runner at the same time each get
their own, correct results."""
import datetime
import threading

import numpy as np
import pytest

from compiler.fusion import fuse_models
from fused_runs import check_outputs, make_feeds
from fusion_test_models import gated_model, mlp_model, softmax3d_model
from tf_popef_op.runtime import ModelRunner, RuntimeConfig

THREADS = 8
CALLS = 25


@pytest.fixture(scope="module")
def fused():
    entries = [dict(input_model=mlp_model("X", "Y", (8, 16, 4), seed=5), batch_size=2),
               dict(input_model=gated_model(("a", "b"), seed=6), batch_size=3, precision="fp16"),
               dict(input_model=softmax3d_model("f", opset=13), batch_size=1),
               dict(input_model=mlp_model("inp", "out", (8, 12, 6), seed=7, opset=11), batch_size=4,
                    precision="fp16")]
    return entries, fuse_models(entries)


@pytest.mark.parametrize("config", [
    RuntimeConfig(validate_io_params=False),
    RuntimeConfig(batching_dim=0, validate_io_params=False, timeout_ns=datetime.timedelta(microseconds=500)),
], ids=["batching-off", "dynamic-batching"])
def test_threads_on_different_subgraphs(fused, config):
    entries, exe = fused
    dynamic = config.batching_dim == 0
    errors = []
    barrier = threading.Barrier(THREADS)
    # Inputs and expected results are prepared up front, so threads only call the runner.
    plans = []
    for t in range(THREADS):
        rng = np.random.default_rng(100 + t)
        calls = []
        for i in range(CALLS):
            index = (t + i) % len(entries) if t % 2 else t % len(entries)  # fixed or rotating subgraph
            sizes = exe.opaque_json("fusion")["subgraphs"][index]
            rows = int(rng.integers(1, 6)) if dynamic and index != 1 else sizes["batch_size"]
            calls.append((index, rows, *make_feeds(exe, index, entries[index]["input_model"], rng, rows)))
        plans.append(calls)

    with ModelRunner(exe, config) as runner:
        results = [[None] * CALLS for _ in range(THREADS)]

        def client(t):
            try:
                barrier.wait()
                for i, (index, _, feed, _) in enumerate(plans[t]):
                    results[t][i] = runner.execute(feed)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(f"thread {t}: {e!r}")

        workers = [threading.Thread(target=client, args=(t,)) for t in range(THREADS)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=300)
        assert not any(w.is_alive() for w in workers), "a client thread hung"
        assert not errors, errors[:3]
        assert runner.stats()["failed_requests"] == 0
    for t in range(THREADS):
        for i, (index, _, _, original) in enumerate(plans[t]):
            check_outputs(exe, index, entries[index]["input_model"], results[t][i], original)
