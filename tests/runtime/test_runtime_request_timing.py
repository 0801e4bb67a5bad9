"""Future.timing(): where a request's time went (queue, gathering inputs, running, scattering
outputs), as the runtime measured it."""
import datetime

import numpy as np
import pytest

from popef_builders import add_model
from tf_popef_op import runtime

DELAY = datetime.timedelta(milliseconds=200)
KEYS = {"queue_ns", "compute_input_ns", "compute_infer_ns", "compute_output_ns", "total_ns", "batches"}


def rows(n, seed):
    return np.random.default_rng(seed).uniform(0, 1, (n, 2)).astype(np.float32)


def test_shared_batch_queue_and_compute_times():
    """Two 1-row requests never fill the 4-row batch: it waits DELAY for more rows, which the
    first request spends in the queue; both share the batch's compute times."""
    config = runtime.RuntimeConfig(batching_dim=0, timeout_ns=DELAY)
    with runtime.ModelRunner(add_model(), config) as runner:
        xs = [rows(1, 0), rows(1, 1)]
        first, second = [runner.execute_async({"X": x, "Y": x}) for x in xs]
        with pytest.raises(runtime.FailedPreconditionError, match="not done yet"):
            first.timing()
        for future, x in zip((first, second), xs):
            np.testing.assert_array_equal(future.result(timeout=30)["O"], 2 * x)
        a, b = first.timing(), second.timing()
    assert set(a) == KEYS
    assert a["batches"] == b["batches"] == 1
    assert a["queue_ns"] >= DELAY.total_seconds() * 1e9
    assert b["queue_ns"] <= a["queue_ns"]
    assert a["compute_infer_ns"] > 0
    for key in ("compute_input_ns", "compute_infer_ns", "compute_output_ns"):
        assert a[key] == b[key] >= 0, key
    for t in (a, b):
        assert t["queue_ns"] + t["compute_input_ns"] + t["compute_infer_ns"] + t["compute_output_ns"] \
            <= t["total_ns"]


def test_request_of_several_batches_sums_their_compute_times():
    with runtime.ModelRunner(add_model()) as runner:   # batching off: 12 rows run as 3 batches
        x = rows(12, 2)
        future = runner.execute_async({"X": x, "Y": x})
        np.testing.assert_array_equal(future.result(timeout=30)["O"], 2 * x)
        timing = future.timing()
    assert timing["batches"] == 3
    assert timing["compute_infer_ns"] > 0
    assert timing["queue_ns"] >= 0 and timing["queue_ns"] + timing["compute_infer_ns"] <= timing["total_ns"]
