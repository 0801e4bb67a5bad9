"""In-process units: REST JSON conversion, the batch scheduler, flags-free error mapping."""
import threading
import time

import grpc
import numpy as np
import pytest
import tensorflow as tf

from serving.model_server import rest_json
from serving.model_server.batching import BatchingOptions, BatchScheduler, BatchingServable
from serving.model_server.errors import ServingError, as_serving_error, http_status
from serving_harness import wait_until


# ---- REST JSON ---------------------------------------------------------------------------
def test_row_and_columnar_inputs():
    dtypes = {"a": tf.float32, "b": tf.string}
    inputs, layout = rest_json.inputs_from_body(
        {"instances": [{"a": [1, 2], "b": "x"}, {"a": [3, 4], "b": {"b64": "eXk="}}]}, dtypes)
    assert layout == "row"
    assert inputs["a"].dtype == np.float32 and inputs["a"].shape == (2, 2)
    assert inputs["b"].tolist() == [b"x", b"yy"]
    inputs, layout = rest_json.inputs_from_body({"inputs": {"a": [[1, 2]], "b": ["z"]}}, dtypes)
    assert layout == "columnar" and inputs["a"].shape == (1, 2)


def test_prediction_bodies():
    one = {"y": np.array([[0.1, 1.0]], np.float32)}
    assert rest_json.predictions_body(one, "row") == {"predictions": [[0.1, 1.0]]}
    assert rest_json.predictions_body(one, "columnar") == {"outputs": [[0.1, 1.0]]}
    two = {"y": np.array([1, 2], np.int64), "z_bytes": np.array([b"\x00", b"a"], object)}
    assert rest_json.predictions_body(two, "row") == {"predictions": [
        {"y": 1, "z_bytes": {"b64": "AA=="}}, {"y": 2, "z_bytes": {"b64": "YQ=="}}]}
    with pytest.raises(ServingError) as caught:
        rest_json.predictions_body({"y": np.zeros(2), "z": np.zeros(3)}, "row")
    assert "inconsistent batch sizes" in caught.value.message


@pytest.mark.parametrize("raw, fragment", [
    (b"", "The document is empty"), (b"[1]", "not an object"), (b"{", "JSON Parse error"),
    (b"\xff", "JSON Parse error")])
def test_parse_errors(raw, fragment):
    with pytest.raises(ServingError) as caught:
        rest_json.parse_body(raw)
    assert fragment in caught.value.message and caught.value.code == grpc.StatusCode.INVALID_ARGUMENT


def test_examples_input():
    proto = rest_json.examples_input({"context": {"c": "s"}, "examples": [{"f": 1.5, "i": [1, 2]}]})
    example = proto.example_list_with_context.examples[0]
    assert list(example.features.feature["f"].float_list.value) == [1.5]
    assert list(example.features.feature["i"].int64_list.value) == [1, 2]
    assert proto.example_list_with_context.context.features.feature["c"].bytes_list.value == [b"s"]


def test_error_mapping():
    assert [http_status(c) for c in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                                     grpc.StatusCode.RESOURCE_EXHAUSTED,
                                     grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.UNAVAILABLE,
                                     grpc.StatusCode.DEADLINE_EXCEEDED,
                                     grpc.StatusCode.INTERNAL)] == [400, 404, 429, 501, 503, 504, 500]
    error = as_serving_error(tf.errors.FailedPreconditionError(None, None, "busy"))
    assert error.code == grpc.StatusCode.FAILED_PRECONDITION and error.message == "busy"


# ---- batch scheduler ---------------------------------------------------------------------
class RecordingServable:
    """Doubles its input; records the batch sizes it ran."""
    name, version = "m", 1

    def __init__(self, output_rows=None):
        self.batches = []
        self.output_rows = output_rows
        self.release = threading.Event()
        self.release.set()
        self.entered = threading.Event()

    def signature_def(self, name):
        return name or "serving_default", None

    def check_inputs(self, key, inputs):
        return inputs

    def run(self, signature, inputs):
        self.entered.set()
        self.release.wait(10)
        x = inputs["x"]
        self.batches.append(len(x))
        rows = self.output_rows or len(x)
        return {"y": (x * 2)[:rows]}


def test_padding_and_split():
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=4, batch_timeout_micros=100_000,
                                               num_batch_threads=1, allowed_batch_sizes=[2, 4]))
    servable = RecordingServable()
    wrapped = BatchingServable(servable, scheduler)
    results = {}

    def call(i):
        results[i] = wrapped.run("", {"x": np.full((1, 2), i, np.float32)})["y"]
    threads = [threading.Thread(target=call, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    scheduler.stop()
    assert servable.batches == [4]   # 3 rows padded to the allowed size 4
    for i in range(3):
        assert results[i].tolist() == [[2 * i, 2 * i]]


def _concurrent_runs(wrapped, count, rows=1):
    """Runs `count` requests of `rows` rows from as many threads; returns their outputs."""
    results = [None] * count

    def call(i):
        results[i] = wrapped.run("", {"x": np.full((rows, 2), i, np.float32)})["y"]
    threads = [threading.Thread(target=call, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    return results


def test_full_batch_runs_at_once_and_a_partial_one_after_the_timeout():
    """TF Serving's rule: a batch runs as soon as it holds max_batch_size rows, otherwise
    batch_timeout_micros after its first request arrived."""
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=4, batch_timeout_micros=300_000,
                                               num_batch_threads=1))
    servable = RecordingServable()
    wrapped = BatchingServable(servable, scheduler)
    start = time.perf_counter()
    results = _concurrent_runs(wrapped, 4)
    full_s = time.perf_counter() - start
    start = time.perf_counter()
    single = wrapped.run("", {"x": np.ones((1, 2), np.float32)})["y"]
    partial_s = time.perf_counter() - start
    scheduler.stop()
    assert servable.batches == [4, 1]
    assert [r.tolist() for r in results] == [[[2 * i, 2 * i]] for i in range(4)]
    assert single.tolist() == [[2, 2]]
    assert full_s < 0.25          # did not wait for the 0.3 s timeout
    assert 0.28 <= partial_s < 5  # waited for it


@pytest.mark.parametrize("threads", [1, 2])
def test_num_batch_threads_bounds_concurrent_batches(threads):
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=1, num_batch_threads=threads))
    servable = RecordingServable()
    active, peak, lock = [0], [0], threading.Lock()
    plain_run = servable.run

    def counting_run(signature, inputs):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.2)   # long enough for every free batch thread to pick up a batch
        with lock:
            active[0] -= 1
        return plain_run(signature, inputs)
    servable.run = counting_run
    wrapped = BatchingServable(servable, scheduler)
    results = _concurrent_runs(wrapped, 4)
    scheduler.stop()
    assert all(r is not None for r in results)
    assert servable.batches == [1, 1, 1, 1] and peak[0] == threads


def test_queue_full_and_oversized_task():
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=2, max_enqueued_batches=1,
                                               num_batch_threads=1))
    servable = RecordingServable()
    servable.release.clear()   # the first batch blocks the only batch thread
    wrapped = BatchingServable(servable, scheduler)
    x = np.zeros((2, 1), np.float32)
    first = threading.Thread(target=wrapped.run, args=("", {"x": x}))
    first.start()
    assert servable.entered.wait(10)   # the first batch left the queue for the blocked thread
    second = threading.Thread(target=wrapped.run, args=("", {"x": x}))
    second.start()
    wait_until(lambda: scheduler._queues, timeout_s=10, what="second batch queued")
    with pytest.raises(ServingError) as caught:
        wrapped.run("", {"x": x})
    assert caught.value.code == grpc.StatusCode.UNAVAILABLE
    assert "batch scheduling queue" in caught.value.message
    with pytest.raises(ServingError) as caught:
        wrapped.run("", {"x": np.zeros((3, 1), np.float32)})
    assert "larger than maximum input batch size 2" in caught.value.message
    servable.release.set()
    first.join(10)
    second.join(10)
    scheduler.stop()


def test_output_without_batch_dimension_fails_the_batch():
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=4, num_batch_threads=1))
    wrapped = BatchingServable(RecordingServable(output_rows=1), scheduler)
    with pytest.raises(ServingError) as caught:
        wrapped.run("", {"x": np.zeros((2, 1), np.float32)})
    assert "cannot be batched" in caught.value.message
    scheduler.stop()


@pytest.mark.parametrize("options, fragment", [
    (dict(max_batch_size=8, allowed_batch_sizes=[2, 4]), "must match max_batch_size"),
    (dict(max_batch_size=8, allowed_batch_sizes=[4, 2, 8]), "strictly increasing"),
    (dict(max_batch_size=0), "max_batch_size must be positive"),
    (dict(max_batch_size=8, enable_large_batch_splitting=True, max_execution_batch_size=16),
     "max_execution_batch_size must be in [1, max_batch_size 8]"),
    (dict(max_batch_size=8, enable_large_batch_splitting=True, max_execution_batch_size=4,
          allowed_batch_sizes=[2, 8]), "must match max_execution_batch_size"),
])
def test_batching_options_validation(options, fragment):
    with pytest.raises(ServingError) as caught:
        BatchingOptions(**options).validate()
    assert fragment in caught.value.message
