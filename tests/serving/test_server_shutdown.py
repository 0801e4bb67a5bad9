"""SIGTERM with an open grpc.health.v1 Watch stream and slow requests in flight on gRPC and
REST: the watcher sees NOT_SERVING, then its stream ends; every in-flight request gets its
full answer; the process exits within 5 s (Kubernetes' grace period is 30 s)."""
import concurrent.futures
import http.client
import json
import signal
import threading
import time

import grpc
import numpy as np
import tensorflow as tf
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from serving_harness import ServerProcess
from serving_models import expected_affine, save_affine

SHUTDOWN_LIMIT_S = 5.0


def _grpc_slow(server, x):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "m"
    request.model_spec.signature_name = "slow"
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(x))
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
        answer = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(
            request, timeout=30)
    return np.array_equal(tf.make_ndarray(answer.outputs["y"]), expected_affine(x))


def _rest_slow(connection, x):
    connection.request("POST", "/v1/models/m:predict",
                       json.dumps({"signature_name": "slow", "instances": x.tolist()}))
    response = connection.getresponse()
    body = json.loads(response.read())
    return response.status == 200 and np.allclose(body["predictions"], expected_affine(x))


def test_sigterm_with_watch_stream_drains_both_protocols_within_5_s(tmp_path):
    save_affine(str(tmp_path / "models" / "m" / "1"))
    server = ServerProcess(tmp_path / "server", "--model_name=m",
                           f"--model_base_path={tmp_path / 'models' / 'm'}",
                           "--enable_grpc_healthcheck_service").start()
    try:
        # Connections opened before SIGTERM (as a client's pool would be): REST requests on
        # them are sent before the signal, the last one immediately before it; one more
        # connection stays idle (keep-alive).
        connections = [http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=30)
                       for _ in range(5)]
        for connection in connections:
            connection.connect()
        watch = health_pb2_grpc.HealthStub(server.channel).Watch(
            health_pb2.HealthCheckRequest(service=""), timeout=60)
        seen = []
        watcher = threading.Thread(target=lambda: seen.extend(r.status for r in watch))
        watcher.start()
        rows = [np.full((1, 2), i, np.float32) for i in range(7)]
        last = connections[3]
        with concurrent.futures.ThreadPoolExecutor(7) as pool:
            futures = [pool.submit(_grpc_slow, server, rows[i]) for i in range(3)]
            futures += [pool.submit(_rest_slow, connections[i], rows[3 + i]) for i in range(3)]
            time.sleep(0.1)   # sent; each takes 0.3 s in the model
            last.request("POST", "/v1/models/m:predict",
                         json.dumps({"signature_name": "slow", "instances": rows[6].tolist()}))
            signalled = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            answers = [f.result(timeout=30) for f in futures]
            response = last.getresponse()
            answers.append(response.status == 200 and np.allclose(
                json.loads(response.read())["predictions"], expected_affine(rows[6])))
        exit_code = server.process.wait(30)
        shutdown_s = time.monotonic() - signalled
        watcher.join(10)
        log = server.log()
    finally:
        server.kill()
    assert answers == [True] * 7, log
    assert exit_code == 0 and "Server stopped cleanly" in log, log
    assert shutdown_s <= SHUTDOWN_LIMIT_S, (shutdown_s, log)
    serving, not_serving = (health_pb2.HealthCheckResponse.SERVING,
                            health_pb2.HealthCheckResponse.NOT_SERVING)
    assert seen == [serving, not_serving], seen   # the stream ended (not cancelled) after it
    print(f"shutdown took {shutdown_s:.2f} s")
