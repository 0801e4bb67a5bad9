"""Model warm-up: replays `assets.extra/tf_serving_warmup_requests` (a TFRecord file of
PredictionLog records, as TF Serving reads it) against a freshly loaded version before it
becomes available, so the first real request does not pay for tracing and allocation."""
import logging
import posixpath
import time

from tensorflow_serving.apis import prediction_log_pb2

from serving.model_server.errors import invalid_argument
from serving.model_server.tensor_codec import to_ndarray
from serving.model_server.version_source import join

WARMUP_FILE = "assets.extra/tf_serving_warmup_requests"
MAX_RECORDS = 1000   # TF Serving's limit
log = logging.getLogger("popef_model_server")


def warmup_records(model_path: str):
    """The PredictionLog records of a version (read through tf.io.gfile: any file system)."""
    import tensorflow as tf
    path = join(model_path, WARMUP_FILE)
    if not tf.io.gfile.exists(path):
        return []
    records = []
    for index, raw in enumerate(tf.data.TFRecordDataset(path).as_numpy_iterator()):
        if index >= MAX_RECORDS:
            raise invalid_argument(f"{path}: more than {MAX_RECORDS} warm-up records")
        entry = prediction_log_pb2.PredictionLog()
        entry.ParseFromString(raw)
        records.append(entry)
    return records


def warm_up(servable, model_path: str, iterations: int = 1) -> int:
    """Runs every record `iterations` times; returns the number of calls. A failing record
    fails the load (TF Serving does the same), naming the record."""
    records = warmup_records(model_path)
    start = time.perf_counter()
    calls = 0
    for index, entry in enumerate(records):
        kind = entry.WhichOneof("log_type")
        if kind != "predict_log":
            raise invalid_argument(f"warm-up record {index} in {WARMUP_FILE}: {kind} is not "
                                   "supported; record PredictRequests (predict_log)")
        request = entry.predict_log.request
        inputs = {name: to_ndarray(proto, name) for name, proto in request.inputs.items()}
        for _ in range(iterations):
            try:
                servable.run(request.model_spec.signature_name, inputs)
            except Exception as error:
                message = getattr(error, "message", str(error))
                raise invalid_argument(f"warm-up record {index} in {WARMUP_FILE} failed: "
                                       f"{message}") from None
            calls += 1
    if records:
        log.info("Finished reading warmup data for model at %s. Number of warmup records "
                 "read: %d. Elapsed time (microseconds): %d.", model_path, len(records),
                 int((time.perf_counter() - start) * 1e6))
    return calls


def write_warmup_file(model_path: str, requests) -> str:
    """Writes PredictRequests as TF Serving's warm-up file (for exporters and tests)."""
    import tensorflow as tf
    path = join(model_path, WARMUP_FILE)
    tf.io.gfile.makedirs(posixpath.dirname(path))
    with tf.io.TFRecordWriter(path) as writer:
        for request in requests:
            entry = prediction_log_pb2.PredictionLog()
            entry.predict_log.request.CopyFrom(request)
            writer.write(entry.SerializeToString())
    return path
