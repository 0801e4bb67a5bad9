"""Limits a hostile request cannot exceed and bounded overload, against one server process:
413 before a too-large body is read, a bounded JSON nesting depth, shapes that would decode to
more than --max_decoded_tensor_bytes refused before allocation, 429 / RESOURCE_EXHAUSTED at
once past --max_queued_requests(_per_model) with the server's RSS flat, and deadlines that
cancel queued work. The `slow` signature sleeps 0.3 s, so requests stay in flight."""
import concurrent.futures
import json
import re
import socket
import threading
import time

import grpc
import numpy as np
import pytest
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from serving.model_server.request_limits import MAX_JSON_DEPTH
from serving.model_server.tensor_codec import to_tensor_proto
from serving_harness import ServerProcess, free_port
from serving_models import save_affine

PER_MODEL = 4
TOTAL = 6
BODY_LIMIT = 1 << 20
TENSOR_LIMIT = 1 << 24
TIMEOUT_MS = 700
MONITORING = 'prometheus_config { enable: true path: "/metrics" }'


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("overload")
    for name in ("affine", "other"):
        save_affine(str(root / "models" / name / "1"))
    config = root / "models.config"
    config.write_text("model_config_list {\n" + "".join(
        f'  config {{ name: "{m}" base_path: "{root / "models" / m}" '
        'model_platform: "tensorflow" }\n' for m in ("affine", "other")) + "}\n")
    monitoring = root / "monitoring.config"
    monitoring.write_text(MONITORING + "\n")
    process = ServerProcess(
        root / "server", f"--model_config_file={config}",
        f"--monitoring_config_file={monitoring}",
        f"--max_queued_requests={TOTAL}", f"--max_queued_requests_per_model={PER_MODEL}",
        f"--rest_api_max_body_bytes={BODY_LIMIT}", f"--max_decoded_tensor_bytes={TENSOR_LIMIT}",
        f"--rest_api_timeout_in_ms={TIMEOUT_MS}", "--rest_api_num_threads=1",
        "--grpc_max_threads=2", f"--grpc_inference_port={free_port()}").start()
    yield process
    assert process.stop() == 0, process.log()


def _rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        return int(re.search(r"VmRSS:\s+(\d+) kB", handle.read()).group(1)) * 1024


def _slow_body():
    return {"signature_name": "slow", "instances": [[1.0, 2.0]]}


def _rest_predict(server, model="affine", body=None):
    started = time.monotonic()
    status, answer = server.http("POST", f"/v1/models/{model}:predict", body or _slow_body())
    return status, answer, time.monotonic() - started


def _grpc_predict(server, model="affine", signature="slow", timeout=30, inputs=None):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    for name, proto in (inputs or {"x": to_tensor_proto(np.ones((1, 2), np.float32))}).items():
        request.inputs[name].CopyFrom(proto)
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel)
    started = time.monotonic()
    try:
        stub.Predict(request, timeout=timeout)
        return grpc.StatusCode.OK, "", time.monotonic() - started
    except grpc.RpcError as error:
        return error.code(), error.details(), time.monotonic() - started


def _burst(count, call):
    """`count` calls released at once; their results."""
    barrier = threading.Barrier(count)

    def one(i):
        barrier.wait()
        return call(i)
    with concurrent.futures.ThreadPoolExecutor(count) as pool:
        return list(pool.map(one, range(count)))


def _request_count(server, model):
    status, text = server.http("GET", "/metrics")
    assert status == 200
    total = 0.0
    for line in text.splitlines():
        if line.startswith(":tensorflow:serving:request_count{") and \
                f'model_name="{model}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_body_over_the_limit_gets_413_before_it_is_sent(server):
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=10) as sock:
        sock.sendall(b"POST /v1/models/affine:predict HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n" % (BODY_LIMIT + 1))   # no body follows
        answer = b""
        while True:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), answer
    assert "--rest_api_max_body_bytes" in json.loads(body)["error"]
    assert str(BODY_LIMIT) in json.loads(body)["error"]


def test_body_at_the_limit_is_read(server):
    padding = " " * (BODY_LIMIT - 200)
    raw = ('{"instances": [[1.0, 2.0]]' + padding + "}").encode()
    assert len(raw) <= BODY_LIMIT
    status, answer = server.http("POST", "/v1/models/affine:predict", raw)
    assert status == 200, answer
    assert answer == {"predictions": [[3.0, 5.0]]}


_PREDICT_BODIES = {
    "/v1/models/affine:predict": ({"instances": [[1.0, 2.0]]}, lambda a: a["predictions"] == [[3.0, 5.0]]),
    "/v2/models/affine/infer": ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 2],
                                             "data": [1.0, 2.0]}]}, lambda a: a["outputs"][0]["data"] == [3.0, 5.0]),
}


def _send_chunked(server, path, chunks):
    """A raw HTTP/1.1 POST with Transfer-Encoding: chunked and the given chunks (the
    terminating empty chunk only if listed); the raw answer, read until the server closes
    or a full response with Content-Length has arrived."""
    with socket.create_connection(("127.0.0.1", server.rest_port), timeout=10) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n".encode())
        for chunk in chunks:
            sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        answer = b""
        while True:
            head, _, body = answer.partition(b"\r\n\r\n")
            length = re.search(rb"Content-Length: (\d+)", head, re.IGNORECASE)
            if length and len(body) >= int(length.group(1)):
                return answer
            data = sock.recv(65536)
            if not data:
                return answer
            answer += data


@pytest.mark.parametrize("path", sorted(_PREDICT_BODIES))
def test_chunked_body_over_the_limit_gets_413_naming_the_flag(server, path):
    piece = b" " * (1 << 16)
    chunks = [piece] * (BODY_LIMIT // len(piece)) + [b" "]    # BODY_LIMIT + 1 bytes, unterminated
    answer = _send_chunked(server, path, chunks)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), answer[:300]
    assert b"Connection: close" in head
    assert json.loads(body) == {"error": f"the request body has at least {BODY_LIMIT + 1} bytes, more than "
                                         f"the limit of {BODY_LIMIT} (--rest_api_max_body_bytes)"}


@pytest.mark.parametrize("path", sorted(_PREDICT_BODIES))
def test_chunked_body_under_the_limit_is_served(server, path):
    request, is_right = _PREDICT_BODIES[path]
    raw = json.dumps(request).encode()
    padding = b" " * (BODY_LIMIT - len(raw) - 10)      # whitespace, so the body stays valid JSON
    answer = _send_chunked(server, path, [raw[:5], raw[5:], padding, b""])
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), answer[:300]
    assert is_right(json.loads(body)), body


@pytest.mark.parametrize("path", ["/v1/models/affine:predict", "/v2/models/affine/infer"])
def test_json_nested_past_the_limit_is_a_400_naming_it(server, path):
    deep = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)
    status, answer = server.http("POST", path, ('{"instances": ' + deep + "}").encode())
    assert status == 400, answer
    assert f"limit of {MAX_JSON_DEPTH} nested" in answer["error"]


def test_json_very_deep_is_still_a_400(server):
    deep = "[" * 100_000
    status, answer = server.http("POST", "/v1/models/affine:predict",
                                 ('{"instances": ' + deep).encode())
    assert status == 400, answer
    assert "nesting depth" in answer["error"]


def test_tensorproto_shape_past_the_decoded_limit_is_refused(server):
    proto = to_tensor_proto(np.ones((1, 2), np.float32))
    proto.tensor_shape.dim[0].size = 2 ** 40      # one value repeated to 2**41 floats
    proto.ClearField("tensor_content")
    proto.float_val.append(1.0)
    code, details, _ = _grpc_predict(server, signature="", inputs={"x": proto})
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "input 'x'" in details and "--max_decoded_tensor_bytes" in details


def test_v2_bytes_shape_larger_than_its_data_is_refused(server):
    header = json.dumps({"inputs": [{"name": "x", "datatype": "BYTES", "shape": [2 ** 20],
                                     "parameters": {"binary_data_size": 8}}]}).encode()
    request = __import__("urllib.request").request.Request(
        server.url("/v2/models/affine/infer"), data=header + b"\0" * 8, method="POST",
        headers={"Inference-Header-Content-Length": str(len(header))})
    with pytest.raises(__import__("urllib.error").error.HTTPError) as caught:
        __import__("urllib.request").request.urlopen(request, timeout=30)
    assert caught.value.code == 400
    assert "input 'x'" in json.loads(caught.value.read())["error"]


def test_overload_answers_429_and_resource_exhausted_at_once_with_flat_rss(server):
    _rest_predict(server)       # warm: first-request allocations are not growth
    _grpc_predict(server)
    before = _rss_bytes(server.process.pid)
    refused_rest = refused_grpc = 0
    for _ in range(5):
        results = _burst(16, lambda i: _rest_predict(server) if i % 2 else
                         _grpc_predict(server, timeout=30))
        for status, answer, seconds in results:
            if status in (429, grpc.StatusCode.RESOURCE_EXHAUSTED):
                message = answer["error"] if status == 429 else answer
                # gRPC's own bound on RPCs waiting for a thread (--max_queued_requests)
                # answers with gRPC's message.
                assert (f"--max_queued_requests_per_model={PER_MODEL}" in message
                        or message == "Concurrent RPC limit exceeded!"), message
                assert seconds < 0.25, seconds     # refused at once, not after a wait
                refused_rest += status == 429
                refused_grpc += status == grpc.StatusCode.RESOURCE_EXHAUSTED
            else:
                assert status in (200, 504, grpc.StatusCode.OK), (status, answer)
    after = _rss_bytes(server.process.pid)
    assert refused_rest and refused_grpc
    # Answered requests free their place, so late arrivals of a burst may be admitted: the
    # count of refusals depends on timing, their presence and speed do not.
    assert refused_rest + refused_grpc >= 16
    assert after < before * 1.10, (before, after)


def test_native_kserve_listener_refuses_past_the_bound_at_once(server):
    """The native v2 listener holds at most --max_queued_requests RPCs (gRPC C++ refuses the
    rest at once); the Python servicer it hands SavedModel requests to applies its per-model
    bound. Either refusal is immediate, and the listener keeps serving."""
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException
    client = grpcclient.InferenceServerClient(f"127.0.0.1:{server.grpc_inference_port}")

    def slow(_):
        x = grpcclient.InferInput("x", [1, 2], "FP32")
        x.set_data_from_numpy(np.ones((1, 2), np.float32))
        started = time.monotonic()
        try:
            client.infer("affine/slow", [x], client_timeout=30)
            return "OK", "", time.monotonic() - started
        except InferenceServerException as error:
            return error.status(), error.message(), time.monotonic() - started
    results = _burst(16, slow)
    refused = [(message, seconds) for status, message, seconds in results
               if status == "StatusCode.RESOURCE_EXHAUSTED"]
    assert {status for status, _, _ in results} <= {"OK", "StatusCode.RESOURCE_EXHAUSTED"}
    assert len(refused) >= 16 - TOTAL, results
    for message, seconds in refused:
        assert (f"--max_queued_requests_per_model={PER_MODEL}" in message
                or "Threadpool Exhausted" in message), message
        assert seconds < 0.25, seconds
    assert client.is_server_live()
    client.close()


def test_total_bound_spans_models(server):
    results = _burst(2 * PER_MODEL, lambda i: _rest_predict(server, ("affine", "other")[i % 2]))
    refused = [answer["error"] for status, answer, _ in results if status == 429]
    assert len(refused) >= 2 * PER_MODEL - TOTAL
    assert any(f"--max_queued_requests={TOTAL}" in message for message in refused)


def test_rest_deadline_cancels_queued_work(server):
    """One REST worker thread, 0.3 s per request, 0.7 s deadline: 4 requests need 1.2 s, so
    the last cannot start before 0.9 s and must time out queued and never run."""
    time.sleep(1.5)     # earlier bursts have finished running
    counted = _request_count(server, "other")
    results = _burst(4, lambda i: _rest_predict(server, "other"))
    statuses = [status for status, _, _ in results]
    assert set(statuses) == {200, 504}, results
    assert all(seconds < TIMEOUT_MS / 1000 + 0.5 for _, _, seconds in results)
    time.sleep(1.0)     # a request that timed out while running still finishes (and counts)
    ran = _request_count(server, "other") - counted
    assert statuses.count(200) <= ran <= 3


def test_grpc_deadline_passed_while_queued(server):
    results = _burst(3, lambda i: _grpc_predict(server, timeout=0.2 if i == 2 else 30))
    codes = [code for code, _, _ in results]
    assert codes[2] in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.OK)
    assert results[2][2] < 0.6
    assert codes[0] == codes[1] == grpc.StatusCode.OK
