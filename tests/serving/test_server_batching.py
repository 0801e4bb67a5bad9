"""Batching (TF Serving parameters, padding to allowed sizes, a bounded queue answering
UNAVAILABLE / 503 as in TF Serving), Prometheus metrics, warm-up records, and SIGTERM draining the
requests in flight. One server; the drain test runs last and stops it."""
import concurrent.futures
import re
import signal
import time

import grpc
import numpy as np
import pytest
import tensorflow as tf
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from serving.model_server.warmup import write_warmup_file
from serving_harness import ServerProcess
from serving_models import expected_affine, save_affine

BATCHING = """
max_batch_size { value: 4 }
batch_timeout_micros { value: 200000 }
max_enqueued_batches { value: 1 }
num_batch_threads { value: 1 }
allowed_batch_sizes: 2
allowed_batch_sizes: 4
"""
MONITORING = 'prometheus_config { enable: true path: "/monitoring/prometheus/metrics" }'


def _request(rows, signature=""):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "m"
    request.model_spec.signature_name = signature
    x = np.arange(rows * 2, dtype=np.float32).reshape(rows, 2)
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(x))
    return request, x


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("batching")
    model = save_affine(str(root / "models" / "m" / "1"))
    write_warmup_file(model, [_request(1)[0]])
    (root / "batching.config").write_text(BATCHING)
    (root / "monitoring.config").write_text(MONITORING)
    process = ServerProcess(root / "server", "--model_name=m",
                            f"--model_base_path={root / 'models' / 'm'}", "--enable_batching",
                            f"--batching_parameters_file={root / 'batching.config'}",
                            f"--monitoring_config_file={root / 'monitoring.config'}",
                            "--enable_grpc_healthcheck_service").start()
    yield process
    process.stop()


def _stub(server):
    return prediction_service_pb2_grpc.PredictionServiceStub(server.channel)


def _metric(server, name, **labels):
    status, text = server.http("GET", "/monitoring/prometheus/metrics")
    assert status == 200
    total = 0.0
    for line in text.splitlines():
        match = re.match(r"^(\S+?)(\{.*\})? (\S+)$", line)
        if match and match.group(1) == name and all(
                f'{k}="{v}"' in (match.group(2) or "") for k, v in labels.items()):
            total += float(match.group(3))
    return total


def test_warmup_ran_at_load(server):
    assert "Number of warmup records read: 1." in server.log()


def test_concurrent_requests_share_a_padded_batch(server):
    batches_before = _metric(server, ":tfpopef:server:batches_executed", model_name="m")
    padding_before = _metric(server, ":tfpopef:server:padding_rows", model_name="m")
    requests = [_request(1) for _ in range(3)]
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda r: _stub(server).Predict(r[0], timeout=30), requests))
    for (_, x), answer in zip(requests, answers):
        np.testing.assert_array_equal(tf.make_ndarray(answer.outputs["y"]), expected_affine(x))
    batches = _metric(server, ":tfpopef:server:batches_executed", model_name="m") - batches_before
    padding = _metric(server, ":tfpopef:server:padding_rows", model_name="m") - padding_before
    # Three 1-row requests within the 0.2 s timeout form one batch, padded from 3 to 4 rows.
    assert batches == 1 and padding == 1


def test_full_queue_answers_unavailable_and_503(server):
    def send(index):
        request, x = _request(4, "slow")
        if index % 3 == 2:
            status, body = server.http("POST", "/v1/models/m:predict",
                                       {"signature_name": "slow", "instances": x.tolist()})
            return "OK" if status == 200 else (status, body["error"])
        try:
            _stub(server).Predict(request, timeout=30)
            return "OK"
        except grpc.RpcError as error:
            return (error.code(), error.details())

    # One batch thread, each full batch takes 0.3 s, one batch may wait: of 9 simultaneous
    # full-size requests at most two are answered, the rest are refused at once.
    with concurrent.futures.ThreadPoolExecutor(9) as pool:
        results = list(pool.map(send, range(9)))
    refused = [r for r in results if r != "OK"]
    assert results.count("OK") >= 1 and len(refused) >= 5, results
    for code, message in refused:
        assert code in (grpc.StatusCode.UNAVAILABLE, 503), results
        assert "batch scheduling queue" in message
    assert any(code == 503 for code, _ in refused), results
    assert _metric(server, ":tensorflow:serving:batching_session:queue_full_count",
                   model_name="m") >= len(refused)


def test_task_larger_than_max_batch_size(server):
    with pytest.raises(grpc.RpcError) as caught:
        _stub(server).Predict(_request(5)[0], timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "larger than maximum input batch size 4" in caught.value.details()


def test_prometheus_metrics_use_tf_serving_names(server):
    server.http("POST", "/v1/models/m:predict", {"instances": [[1, 2]]})
    server.http("POST", "/v1/models/nope:predict", {"instances": [[1, 2]]})
    assert _metric(server, ":tensorflow:serving:request_count", model_name="m",
                   status="OK") >= 4
    assert _metric(server, ":tensorflow:serving:request_count", model_name="nope",
                   status="NOT_FOUND") == 1
    assert _metric(server, ":tensorflow:serving:request_latency_count", model_name="m",
                   API="predict", entrypoint="REST") >= 1
    assert _metric(server, ":tensorflow:serving:batching_session:processed_batch_size_count",
                   model_name="m") >= 2
    status, text = server.http("GET", "/monitoring/prometheus/metrics")
    assert "# TYPE :tensorflow:serving:request_count counter" in text
    assert "_total" not in text, [l for l in text.splitlines() if "_total" in l]
    assert ":tfpopef:device:reload_count" in text, server.log()


def test_sigterm_drains_in_flight_requests(server):
    """Runs last: stops the module's server. While it drains, the health service tells its
    watchers NOT_SERVING (load balancers stop routing to it) before in-flight requests end."""
    health = health_pb2_grpc.HealthStub(server.channel)
    watch = health.Watch(health_pb2.HealthCheckRequest(service=""), timeout=60)
    statuses = iter(watch)
    assert next(statuses).status == health_pb2.HealthCheckResponse.SERVING

    def slow_call(index):
        request, x = _request(1, "slow")
        if index == 2:
            status, body = server.http("POST", "/v1/models/m:predict",
                                       {"signature_name": "slow", "instances": x.tolist()})
            return status == 200 and np.allclose(body["predictions"], expected_affine(x))
        answer = _stub(server).Predict(request, timeout=30)
        return np.array_equal(tf.make_ndarray(answer.outputs["y"]), expected_affine(x))

    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(slow_call, i) for i in range(3)]
        time.sleep(0.15)   # all are queued or running: the batch takes >= 0.3 s
        server.process.send_signal(signal.SIGTERM)
        assert next(statuses).status == health_pb2.HealthCheckResponse.NOT_SERVING
        still_running = sum(not f.done() for f in futures)
        assert [f.result(timeout=30) for f in futures] == [True, True, True]
    assert still_running > 0   # NOT_SERVING came while requests were still being served
    watch.cancel()
    assert server.process.wait(30) == 0
    assert "Server stopped cleanly" in server.log()
