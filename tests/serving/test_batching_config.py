"""Batching and monitoring files with every upstream field, large-batch splitting, and
per-model batching parameters (unit level: the scheduler with an in-process servable)."""
import logging
import threading

import numpy as np
import pytest

from serving.model_server.batching import (BatchingOptions, BatchingServable, BatchScheduler,
                                           load_batching_options)
from serving.model_server.metrics import prometheus_path
from serving.model_server.server_protos import (BatchingParameters, MonitoringConfig,
                                                parse_text_file)

# Every field of tensorflow_serving/servables/tensorflow/session_bundle_config.proto's
# BatchingParameters (the vendored file).
EVERY_BATCHING_FIELD = """
max_batch_size { value: 8 }
batch_timeout_micros { value: 1000 }
max_enqueued_batches { value: 20 }
num_batch_threads { value: 2 }
thread_pool_name { value: "model_server_batch_threads" }
enable_large_batch_splitting { value: true }
max_execution_batch_size { value: 4 }
allowed_batch_sizes: 2
allowed_batch_sizes: 4
pad_variable_length_inputs: true
"""
EVERY_MONITORING_FIELD = 'prometheus_config { enable: true path: "/metrics/here" }'


class AffineServable:
    """y = softmax(x @ W + b) per row, recording the batch sizes it ran (the row-wise answer
    does not depend on how rows are batched)."""
    name, version = "m", 1

    def __init__(self):
        rng = np.random.default_rng(0)
        self.weights = rng.standard_normal((3, 5)).astype(np.float32)
        self.bias = rng.standard_normal(5).astype(np.float32)
        self.batches = []
        self._lock = threading.Lock()

    def signature_def(self, name):
        return name or "serving_default", None

    def check_inputs(self, key, inputs):
        return inputs

    def run(self, signature, inputs):
        with self._lock:
            self.batches.append(len(inputs["x"]))
        logits = inputs["x"] @ self.weights + self.bias
        exp = np.exp(logits - logits.max(axis=1, keepdims=True))
        return {"y": exp / exp.sum(axis=1, keepdims=True), "row": inputs["x"][:, :1]}


def test_every_batching_field_loads_and_unused_ones_warn_once(tmp_path, caplog):
    path = tmp_path / "batching.config"
    path.write_text(EVERY_BATCHING_FIELD)
    proto = parse_text_file(str(path), BatchingParameters)
    assert {f.name for f, _ in proto.ListFields()} == {
        f.name for f in BatchingParameters.DESCRIPTOR.fields}
    with caplog.at_level(logging.WARNING, logger="popef_model_server"):
        options = load_batching_options(str(path))
        load_batching_options(str(path))
    assert (options.max_batch_size, options.batch_timeout_micros, options.max_enqueued_batches,
            options.num_batch_threads, options.allowed_batch_sizes,
            options.enable_large_batch_splitting, options.max_execution_batch_size) == (
        8, 1000, 20, 2, [2, 4], True, 4)
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2, warned   # once per field, not once per load
    assert any("thread_pool_name is accepted but ignored" in w for w in warned)
    assert any("pad_variable_length_inputs is accepted but ignored" in w for w in warned)


def test_every_monitoring_field_loads(tmp_path):
    path = tmp_path / "monitoring.config"
    path.write_text(EVERY_MONITORING_FIELD)
    proto = parse_text_file(str(path), MonitoringConfig)
    assert {f.name for f, _ in proto.prometheus_config.ListFields()} == {
        f.name for f in proto.prometheus_config.DESCRIPTOR.fields}
    assert prometheus_path(str(path)) == "/metrics/here"


def test_bad_config_file_names_the_file(tmp_path):
    path = tmp_path / "batching.config"
    path.write_text("max_batch_size { value: 8 }\nno_such_field: 1\n")
    with pytest.raises(Exception) as caught:
        load_batching_options(str(path))
    assert str(path) in str(caught.value) and "no_such_field" in str(caught.value)


def _run_concurrently(wrapped, arrays):
    results = [None] * len(arrays)

    def call(i):
        results[i] = wrapped.run("", {"x": arrays[i]})
    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(arrays))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    return results


def test_large_batch_splitting_matches_the_unsplit_result():
    servable = AffineServable()
    options = BatchingOptions(max_batch_size=16, batch_timeout_micros=50_000,
                              num_batch_threads=2, enable_large_batch_splitting=True,
                              max_execution_batch_size=4, allowed_batch_sizes=[2, 4])
    scheduler = BatchScheduler(options)
    wrapped = BatchingServable(servable, scheduler)
    rng = np.random.default_rng(1)
    arrays = [rng.standard_normal((rows, 3)).astype(np.float32) for rows in (11, 3, 1, 16)]
    results = _run_concurrently(wrapped, arrays)
    scheduler.stop()
    assert max(servable.batches) == 4 and len(servable.batches) >= 8, servable.batches
    for x, result in zip(arrays, results):
        unsplit = servable.run("", {"x": x})
        np.testing.assert_allclose(result["y"], unsplit["y"], rtol=1e-6)
        np.testing.assert_array_equal(result["row"], x[:, :1])   # rows in request order


def test_without_splitting_a_task_never_spans_batches():
    servable = AffineServable()
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=4, batch_timeout_micros=50_000,
                                               num_batch_threads=1))
    wrapped = BatchingServable(servable, scheduler)
    arrays = [np.ones((3, 3), np.float32), np.ones((3, 3), np.float32)]
    _run_concurrently(wrapped, arrays)
    scheduler.stop()
    assert servable.batches == [3, 3]


def test_split_task_needing_more_batches_than_the_queue_holds_is_refused():
    servable = AffineServable()
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=16, max_enqueued_batches=2,
                                               num_batch_threads=1,
                                               enable_large_batch_splitting=True,
                                               max_execution_batch_size=4))
    wrapped = BatchingServable(servable, scheduler)
    with pytest.raises(Exception) as caught:
        wrapped.run("", {"x": np.ones((9, 3), np.float32)})
    assert "batch scheduling queue" in str(caught.value)
    assert servable.batches == []   # nothing of the refused task ran
    scheduler.stop()
    # The refused task left no empty queue behind for the batch threads to wait on.
    assert not any(thread.is_alive() for thread in scheduler._threads)


def test_per_model_options_share_the_scheduler_threads():
    scheduler = BatchScheduler(BatchingOptions(max_batch_size=8, num_batch_threads=1))
    small, large = AffineServable(), AffineServable()
    small_queue = BatchingServable(small, scheduler, BatchingOptions(max_batch_size=2))
    large_queue = BatchingServable(large, scheduler)
    with pytest.raises(Exception) as caught:
        small_queue.run("", {"x": np.ones((3, 3), np.float32)})
    assert "larger than maximum input batch size 2" in str(caught.value)
    assert large_queue.run("", {"x": np.ones((3, 3), np.float32)})["y"].shape == (3, 5)
    scheduler.stop()


def test_config_files_are_read_through_tf_io_gfile():
    """ram:// stands for any file system TensorFlow knows (gs://, s3://, hdfs://)."""
    import tensorflow as tf
    from serving.model_server.flags import parse_flags
    path = "ram://popef-test/batching.config"
    with tf.io.gfile.GFile(path, "w") as handle:
        handle.write("max_batch_size { value: 3 }")
    options = parse_flags(["--model_base_path=/m", "--enable_batching",
                           f"--batching_parameters_file={path}"])
    assert load_batching_options(options.batching_parameters_file).max_batch_size == 3
    with pytest.raises(SystemExit):
        parse_flags(["--model_base_path=/m", "--enable_batching",
                     "--batching_parameters_file=ram://popef-test/missing.config"])
