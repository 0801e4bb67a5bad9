"""KServe v2 / Triton protocol, driven with the real tritonclient (HTTP and gRPC) against one
server subprocess: bare PopEFs (an MLP with a Triton config.pbtxt, a fused PopEF whose
subgraphs are models `fused/adder` and `fused/concat`) and a SavedModel, results checked
against onnxruntime on the source ONNX models (and numpy for the SavedModel).

Every gRPC test runs against both v2 gRPC listeners: the Python one on `--port` and the
native (C++) one on `--grpc_inference_port`, whose fast path answers ModelInfer on bare PopEFs
and hands everything else to the Python servicer. The server process holds TensorFlow (the
SavedModel) and the native module at once.

This process imports tritonclient only, never the server's generated `inference` protos
(both register the same protobuf symbols): the server runs in a subprocess."""
import json
import os
import queue
import shutil
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from prometheus_client.parser import text_string_to_metric_families
from tritonclient.utils import InferenceServerException

from popef.format import BlobType
from popef.reader import PopefFile
from popef.writer import encode_popef, json_payload

from kserve_models import (mlp_onnx, mlp_reference, onnxruntime_run, write_fused_model,
                           write_popef_model)
from serving_harness import ServerProcess, free_port, wait_until
from serving_models import expected_affine, save_affine

FEATURES, CLASSES = 16, 8
MLP_CONFIG = """max_batch_size: 8
dynamic_batching { max_queue_delay_microseconds: 200 }
instance_group { count: 1 kind: KIND_GPU gpus: [2] }
input { name: "x" data_type: TYPE_FP32 dims: [16] }
"""
TIMED_DELAY_NS = 20_000_000
TIMED_CONFIG = f"""max_batch_size: 8
dynamic_batching {{ max_queue_delay_microseconds: {TIMED_DELAY_NS // 1000} }}
"""
LISTENERS = ("port", "grpc_inference_port")    # the Python and the native v2 gRPC listeners
TIMED_MODELS = {"port": "timed", "grpc_inference_port": "timed_native"}


@pytest.fixture(scope="module")
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp("kserve")
    models = root / "models"
    write_popef_model(str(models), "mlp", mlp_onnx(FEATURES, 32, CLASSES), ["logits"],
                      MLP_CONFIG)
    shutil.copytree(models / "mlp", models / "spare")
    (models / "spare" / "config.pbtxt").unlink()    # no batcher: each request runs alone
    shutil.copytree(models / "mlp", models / "extra")     # in the repository, not the config
    shutil.copytree(models / "mlp", models / "rollout")   # gets a second version
    for timed in TIMED_MODELS.values():                  # for the timing test only
        shutil.copytree(models / "mlp", models / timed)
        (models / timed / "config.pbtxt").write_text(TIMED_CONFIG)
    sources = write_fused_model(str(models))
    save_affine(str(models / "affine" / "1"))
    config = root / "models.config"
    config.write_text("model_config_list {\n" + "".join(
        f'  config {{ name: "{m}" base_path: "{models / m}" model_platform: "tensorflow" }}\n'
        for m in ("mlp", "spare", "fused", "affine", "rollout", *TIMED_MODELS.values())) +
        "}\n")
    monitoring = root / "monitoring.config"
    monitoring.write_text('prometheus_config { enable: true path: "/metrics" }\n')
    return dict(root=root, config=config, monitoring=monitoring, mlp_onnx=str(models / "mlp.onnx"),
                fused_onnx=sources)


@pytest.fixture(scope="module")
def server(repo):
    process = ServerProcess(repo["root"] / "server", f"--model_config_file={repo['config']}",
                            f"--monitoring_config_file={repo['monitoring']}",
                            f"--grpc_inference_port={free_port()}").start()
    yield process
    assert process.stop() == 0, process.log()


@pytest.fixture(scope="module", params=LISTENERS)
def listener(request):
    return request.param


def _grpc_address(server, listener) -> str:
    return f"127.0.0.1:{getattr(server, 'grpc_port' if listener == 'port' else listener)}"


@pytest.fixture(scope="module")
def http(server):
    client = httpclient.InferenceServerClient(f"127.0.0.1:{server.rest_port}", concurrency=4)
    yield client
    client.close()


@pytest.fixture(scope="module")
def grpc_client(server, listener):
    client = grpcclient.InferenceServerClient(_grpc_address(server, listener))
    yield client
    client.close()


def _http_inputs(arrays, binary=True):
    inputs = []
    for name, array in arrays.items():
        datatype = "BYTES" if array.dtype == object else \
            {np.float32: "FP32", np.float16: "FP16", np.int32: "INT32"}[array.dtype.type]
        tensor = httpclient.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array, binary_data=binary)
        inputs.append(tensor)
    return inputs


def _grpc_inputs(arrays):
    inputs = []
    for name, array in arrays.items():
        datatype = "BYTES" if array.dtype == object else \
            {np.float32: "FP32", np.float16: "FP16", np.int32: "INT32", np.float64: "FP64"}[
                array.dtype.type]
        tensor = grpcclient.InferInput(name, list(array.shape), datatype)
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    return inputs


def _rows(count, seed=0):
    return np.random.default_rng(seed).standard_normal((count, FEATURES)).astype(np.float32)


# ---- health and metadata -----------------------------------------------------------------
def test_live_ready_and_server_metadata(http, grpc_client):
    assert http.is_server_live() and http.is_server_ready()
    assert grpc_client.is_server_live() and grpc_client.is_server_ready()
    for metadata in (http.get_server_metadata(),
                     grpc_client.get_server_metadata(as_json=True)):
        assert metadata["name"] == "tf-popef"
        assert {"binary_tensor_data", "model_repository", "statistics"} <= set(
            metadata["extensions"])


def test_model_metadata_bare_popef_fused_and_savedmodel(http, grpc_client):
    mlp = http.get_model_metadata("mlp")
    assert mlp["platform"] == "popef" and mlp["versions"] == ["1"]
    assert mlp["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, FEATURES]}]
    assert mlp["outputs"] == [{"name": "logits", "datatype": "FP32", "shape": [-1, CLASSES]}]
    assert http.get_model_metadata("mlp", "1") == mlp
    concat = grpc_client.get_model_metadata("fused/concat", as_json=True)
    assert concat["inputs"] == [{"name": "X", "datatype": "FP16", "shape": ["-1", "1"]}]
    adder = http.get_model_metadata("fused/adder")
    assert [t["name"] for t in adder["inputs"]] == ["X", "Y"]
    assert adder["outputs"] == [{"name": "O", "datatype": "FP32", "shape": [2]}]
    assert http.get_model_metadata("fused") == dict(adder, name="fused")   # first subgraph
    affine = http.get_model_metadata("affine")
    assert affine["platform"] == "tensorflow_savedmodel"
    assert affine["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 2]}]
    for model in ("mlp", "fused/adder", "fused/concat", "affine", "affine/two_io"):
        assert http.is_model_ready(model) and grpc_client.is_model_ready(model)
    assert not http.is_model_ready("mlp", "7") and not grpc_client.is_model_ready("nope")
    config = http.get_model_config("mlp")
    assert config["max_batch_size"] == 8 and config["input"][0]["dims"] == [FEATURES]
    assert config["instance_group"][0]["gpus"] == [2]    # the emulated IPU config.pbtxt names
    assert grpc_client.get_model_config("mlp", as_json=True)["config"]["max_batch_size"] == 8


# ---- inference ---------------------------------------------------------------------------
@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_http_infer_bare_popef_matches_onnxruntime(http, repo, binary):
    for rows in (1, 3, 8):
        x = _rows(rows, rows)
        result = http.infer("mlp", _http_inputs({"x": x}, binary), outputs=[
            httpclient.InferRequestedOutput("logits", binary_data=binary)], request_id="r1")
        np.testing.assert_allclose(result.as_numpy("logits"), mlp_reference(repo["mlp_onnx"], x),
                                   rtol=1e-5, atol=1e-5)
        assert result.get_response()["id"] == "r1"
        assert result.get_response()["model_version"] == "1"


def test_grpc_infer_bare_popef_matches_onnxruntime(grpc_client, repo):
    # "spare" has no config.pbtxt: requests run alone, zero-padded to the compiled batch of 4
    for model, rows in (("mlp", 1), ("mlp", 5), ("spare", 3), ("spare", 9)):
        x = _rows(rows, 10 + rows)
        result = grpc_client.infer(model, _grpc_inputs({"x": x}), model_version="1")
        np.testing.assert_allclose(result.as_numpy("logits"), mlp_reference(repo["mlp_onnx"], x),
                                   rtol=1e-5, atol=1e-5)


def test_async_requests_from_both_clients(http, grpc_client, repo):
    xs = [_rows(1, 100 + i) for i in range(8)]
    pending = [http.async_infer("mlp", _http_inputs({"x": x})) for x in xs]
    for x, request in zip(xs, pending):
        np.testing.assert_allclose(request.get_result().as_numpy("logits"),
                                   mlp_reference(repo["mlp_onnx"], x), rtol=1e-5, atol=1e-5)
    done = queue.Queue()
    for i, x in enumerate(xs):
        grpc_client.async_infer("mlp", _grpc_inputs({"x": x}),
                                callback=lambda result, error, i=i: done.put((i, result, error)))
    for _ in xs:
        i, result, error = done.get(timeout=60)
        assert error is None, error
        np.testing.assert_allclose(result.as_numpy("logits"),
                                   mlp_reference(repo["mlp_onnx"], xs[i]), rtol=1e-5, atol=1e-5)


def test_every_subgraph_of_the_fused_popef(http, grpc_client, repo):
    adder_onnx, concat_onnx = repo["fused_onnx"]
    x = np.array([[1.5, -2.0]], np.float32)
    y = np.array([[0.25, 4.0]], np.float32)
    expected = onnxruntime_run(adder_onnx, {"X": x, "Y": y})["O"]
    for model in ("fused/adder", "fused"):
        np.testing.assert_array_equal(
            http.infer(model, _http_inputs({"X": x, "Y": y})).as_numpy("O"), expected)
        np.testing.assert_array_equal(
            grpc_client.infer(model, _grpc_inputs({"X": x, "Y": y})).as_numpy("O"), expected)
    h = np.array([[0.5]], np.float16)
    expected = onnxruntime_run(concat_onnx, {"X": h})["O"]
    for result in (http.infer("fused/concat", _http_inputs({"X": h})),
                   http.infer("fused/concat", _http_inputs({"X": h}, binary=False)),
                   grpc_client.infer("fused/concat", _grpc_inputs({"X": h}))):
        assert result.as_numpy("O").dtype == np.float16
        np.testing.assert_array_equal(result.as_numpy("O"), expected)


def test_savedmodel_versions_through_v2(http, grpc_client):
    x = np.array([[1.0, 2.0], [3.0, -4.0]], np.float32)
    for result in (http.infer("affine", _http_inputs({"x": x})),
                   http.infer("affine", _http_inputs({"x": x}, binary=False)),
                   grpc_client.infer("affine", _grpc_inputs({"x": x}))):
        np.testing.assert_allclose(result.as_numpy("y"), expected_affine(x))
    text = np.array([b"ab", b"", "h\u00e9".encode()], dtype=object)
    numbers = np.arange(9, dtype=np.int32).reshape(3, 3)
    for binary in (True, False):
        result = http.infer("affine/two_io", _http_inputs(
            {"text": text, "numbers": numbers}, binary), outputs=[
            httpclient.InferRequestedOutput(n, binary_data=binary)
            for n in ("length", "echo_bytes")])
        np.testing.assert_array_equal(result.as_numpy("length"), [2, 0, 3])
        # JSON carries BYTES as strings; the binary form keeps the bytes
        expected = list(text) if binary else [t.decode() for t in text]
        assert list(result.as_numpy("echo_bytes")) == expected
        assert result.as_numpy("total") is None      # not requested
    result = grpc_client.infer("affine/two_io", _grpc_inputs({"text": text, "numbers": numbers}))
    np.testing.assert_array_equal(result.as_numpy("total"), numbers.sum(axis=1))
    assert list(result.as_numpy("echo_bytes")) == list(text)


def test_tf_serving_predict_on_a_bare_popef(server, repo):
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel)
    x = _rows(2, 7)
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "mlp"
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(x))
    outputs = stub.Predict(request, timeout=60).outputs
    np.testing.assert_allclose(tf.make_ndarray(outputs["logits"]),
                               mlp_reference(repo["mlp_onnx"], x), rtol=1e-5, atol=1e-5)
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "fused"
    request.model_spec.signature_name = "concat"
    h = np.array([[2.0], [3.0]], np.float16)
    request.inputs["X"].CopyFrom(tf.make_tensor_proto(h))
    out = tf.make_ndarray(stub.Predict(request, timeout=60).outputs["O"])
    expected = [onnxruntime_run(repo["fused_onnx"][1], {"X": h[i:i + 1]})["O"] for i in range(2)]
    np.testing.assert_array_equal(out, np.concatenate(expected))
    status, body = server.http("POST", "/v1/models/mlp:predict", {"instances": x.tolist()})
    assert status == 200, body
    np.testing.assert_allclose(np.array(body["predictions"], np.float32),
                               mlp_reference(repo["mlp_onnx"], x), rtol=1e-5, atol=1e-5)
    status, body = server.http("GET", "/v1/models/fused/metadata")
    signatures = body["metadata"]["signature_def"]["signature_def"]
    assert status == 200 and set(signatures) == {"adder", "concat"}
    assert signatures["concat"]["inputs"]["X"]["dtype"] == "DT_HALF"


# ---- errors ------------------------------------------------------------------------------
def _http_error(call):
    with pytest.raises(InferenceServerException) as info:
        call()
    return info.value.status(), info.value.message()


def test_bad_inputs_name_the_problem(http, grpc_client):
    x = _rows(1)
    cases = {
        "datatype": ({"x": x.astype(np.float64)}, "datatype FP64", "FP32"),
        "shape": ({"x": _rows(1)[:, :5]}, "shape [1, 5]", "[-1, 16]"),
        "name": ({"z": x}, "'z'", "missing input(s) 'x'"),
        "missing": ({"X": np.ones((1, 2), np.float32)}, "missing input(s) 'Y'", ""),
        "too many rows": ({"x": _rows(9)}, "9 rows", "max_batch_size 8"),
    }
    for case, (arrays, *needles) in cases.items():
        model = "fused/adder" if case == "missing" else "mlp"
        grpc_arrays = arrays
        if case == "datatype":
            tensor = httpclient.InferInput("x", [1, FEATURES], "FP64")
            tensor.set_data_from_numpy(arrays["x"])
            status, message = _http_error(lambda: http.infer(model, [tensor]))
        else:
            status, message = _http_error(lambda: http.infer(model, _http_inputs(arrays)))
        assert status == "400", (case, status, message)
        assert all(n in message for n in needles), (case, message)
        status, message = _http_error(lambda: grpc_client.infer(model, _grpc_inputs(grpc_arrays)))
        assert status == "StatusCode.INVALID_ARGUMENT", (case, status)
        assert all(n in message for n in needles), (case, message)


def test_unknown_output_is_named(http, grpc_client):
    x = {"x": _rows(1)}
    status, message = _http_error(lambda: http.infer(
        "mlp", _http_inputs(x), outputs=[httpclient.InferRequestedOutput("probs")]))
    assert status == "400" and "'probs'" in message and "logits" in message
    status, message = _http_error(lambda: grpc_client.infer(
        "mlp", _grpc_inputs(x), outputs=[grpcclient.InferRequestedOutput("probs")]))
    assert status == "StatusCode.INVALID_ARGUMENT" and "'probs'" in message


def test_unknown_model_and_version(http, grpc_client):
    x = {"x": _rows(1)}
    for model, version, needle in (("nope", "", "'nope'"), ("mlp", "3", "version 3"),
                                   ("fused/nope", "", "adder, concat")):
        status, message = _http_error(lambda: http.infer(model, _http_inputs(x),
                                                         model_version=version))
        assert status == "404" and needle in message, (status, message)
        status, message = _http_error(lambda: grpc_client.infer(model, _grpc_inputs(x),
                                                                model_version=version))
        assert status == "StatusCode.NOT_FOUND" and needle in message, (status, message)
    status, message = _http_error(lambda: http.get_model_metadata("nope"))
    assert status == "404" and "nope" in message


def test_malformed_http_bodies(server):
    for body, needle in ((b"{", "parse"), (b'{"inputs": []}', "no 'inputs'"),
                         (b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 16], '
                          b'"data": [1, 2]}]}', "2 values"),
                         (b'{"inputs": [{"name": "x", "datatype": "FP99", "shape": [1], '
                          b'"data": [1]}]}', "FP99")):
        status, answer = server.http("POST", "/v2/models/mlp/infer", body)
        assert status == 400 and needle in answer["error"], (body, answer)
    status, answer = server.http("POST", "/v2/models/mlp/infer", b'{"inputs": [{"name": "x", '
                                 b'"datatype": "FP32", "shape": [1, 16], "parameters": '
                                 b'{"binary_data_size": 64}}]}' + b"\0" * 10)
    assert status == 400  # header length header missing: the binary bytes make invalid JSON


def test_unimplemented_grpc_methods_say_so(grpc_client):
    with pytest.raises(InferenceServerException) as info:
        grpc_client.get_trace_settings()
    assert info.value.status() == "StatusCode.UNIMPLEMENTED"
    assert "TraceSetting is not implemented" in info.value.message()


# ---- repository, statistics, metrics -------------------------------------------------------
def test_repository_index_unload_and_load(http, grpc_client):
    index = {(m["name"], m.get("version")): m["state"] for m in http.get_model_repository_index()}
    assert index[("spare", "1")] == "READY" and index[("mlp", "1")] == "READY"
    grpc_index = grpc_client.get_model_repository_index(as_json=True)["models"]
    assert {m["name"] for m in grpc_index} >= {"mlp", "spare", "fused", "affine"}

    grpc_client.unload_model("spare")
    assert not http.is_model_ready("spare") and http.is_model_ready("mlp")
    status, message = _http_error(lambda: grpc_client.infer("spare", _grpc_inputs(
        {"x": _rows(4)})))
    assert status == "StatusCode.NOT_FOUND" and "'spare'" in message, (status, message)
    states = {m["name"]: m for m in http.get_model_repository_index()}
    assert states["spare"]["state"] == "UNAVAILABLE"
    http.load_model("spare")
    assert grpc_client.is_model_ready("spare")
    np.testing.assert_allclose(grpc_client.infer("spare", _grpc_inputs({"x": _rows(4)})).as_numpy(
        "logits"), http.infer("mlp", _http_inputs({"x": _rows(4)})).as_numpy("logits"))
    np.testing.assert_allclose(http.infer("spare", _http_inputs({"x": _rows(1)})).as_numpy(
        "logits"), http.infer("mlp", _http_inputs({"x": _rows(1)})).as_numpy("logits"))

    grpc_client.load_model("extra")          # a directory of the repository, not configured
    assert http.is_model_ready("extra")
    http.unload_model("extra")
    assert not grpc_client.is_model_ready("extra")
    status, message = _http_error(lambda: http.load_model("absent"))
    assert status == "404" and "'absent'" in message
    status, message = _http_error(lambda: grpc_client.unload_model("absent"))
    assert status == "StatusCode.NOT_FOUND" and "'absent'" in message


def test_statistics_and_triton_metrics(server, http, grpc_client):
    http.infer("fused/concat", _http_inputs({"X": np.ones((3, 1), np.float16)}))
    stats = http.get_inference_statistics("fused/concat")["model_stats"]
    assert stats[0]["name"] == "fused/concat" and stats[0]["inference_count"] >= 3
    assert stats[0]["inference_stats"]["success"]["count"] >= 1
    with pytest.raises(InferenceServerException):
        grpc_client.infer("mlp", _grpc_inputs({"x": _rows(1)[:, :3]}))
    grpc_stats = grpc_client.get_inference_statistics("mlp", as_json=True)["model_stats"]
    assert int(grpc_stats[0]["inference_stats"]["fail"]["count"]) >= 1
    text = urllib.request.urlopen(server.url("/metrics"), timeout=30).read().decode()
    for name in ("nv_inference_request_success", "nv_inference_request_failure",
                 "nv_inference_count", "nv_inference_request_duration_us"):
        assert f'{name}{{model="fused/concat",version="1"}}' in text or \
            f'{name}{{model="mlp",version="1"}}' in text, name
    assert ':tensorflow:serving:request_count{model_name="mlp",status="OK"}' in text


def test_queue_and_compute_times_from_the_runtime(server, http, grpc_client, listener):
    """Triton's queue / compute statistics and nv_inference_*_duration_us metrics of `timed`, a
    bare PopEF whose 4-row batches wait up to TIMED_DELAY_NS for more rows (one copy per gRPC
    listener that no other test uses, so the counts are exact, the native fast path's and the
    Python path's together); a SavedModel's requests are not timed by the runtime."""
    timed = TIMED_MODELS[listener]
    for _ in range(2):    # one row at a time: every batch waits out the delay
        http.infer(timed, _http_inputs({"x": _rows(1)}))
        grpc_client.infer(timed, _grpc_inputs({"x": _rows(1)}))
    for request in [http.async_infer(timed, _http_inputs({"x": _rows(2, seed)}))
                    for seed in range(4)]:
        request.get_result()
    with pytest.raises(InferenceServerException):
        grpc_client.infer(timed, _grpc_inputs({"x": _rows(1)[:, :3]}))
    http.infer("affine", _http_inputs({"x": np.ones((1, 2), np.float32)}))
    succeeded, stages = 8, ("queue", "compute_input", "compute_infer", "compute_output")

    grpc_stats = grpc_client.get_inference_statistics(timed, as_json=True)["model_stats"]
    for stats in (http.get_inference_statistics(timed)["model_stats"][0]["inference_stats"],
                  grpc_stats[0]["inference_stats"]):
        assert int(stats["success"]["count"]) == succeeded and int(stats["fail"]["count"]) == 1
        for stage in stages:
            assert int(stats[stage]["count"]) == succeeded, stage
            assert int(stats[stage]["ns"]) > 0, stage
        assert int(stats["queue"]["ns"]) >= 4 * TIMED_DELAY_NS
        assert sum(int(stats[stage]["ns"]) for stage in stages) <= int(stats["success"]["ns"])
    affine = http.get_inference_statistics("affine")["model_stats"][0]["inference_stats"]
    assert int(affine["success"]["count"]) >= 1 and not set(stages) & set(affine)

    text = urllib.request.urlopen(server.url("/metrics"), timeout=30).read().decode()
    # (family, model) -> value: the parser names counter samples `<family>_total`
    values = {(family.name, sample.labels.get("model")): sample.value
              for family in text_string_to_metric_families(text) for sample in family.samples}
    http_stats = http.get_inference_statistics(timed)["model_stats"][0]["inference_stats"]
    assert values[("nv_inference_request_success", timed)] == succeeded
    for stage in stages:
        assert values[(f"nv_inference_{stage}_duration_us", timed)] == pytest.approx(
            int(http_stats[stage]["ns"]) / 1e3), stage
    assert sum(values[(f"nv_inference_{stage}_duration_us", timed)] for stage in stages) <= \
        values[("nv_inference_request_duration_us", timed)]
    assert ("nv_inference_request_success", "affine") in values
    assert not any(name == "nv_inference_queue_duration_us" and model == "affine"
                   for name, model in values)


def test_example_client_script_runs(server):
    import subprocess
    import sys
    from serving_harness import REPO
    for model in ("mlp", "fused/concat", "affine/two_io"):
        done = subprocess.run(
            [sys.executable, os.path.join(REPO, "examples", "kserve_v2_client.py"), "--model",
             model, "--http", f"127.0.0.1:{server.rest_port}",
             "--grpc", f"127.0.0.1:{server.grpc_port}"],
            capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "server live/ready (gRPC): True True" in done.stdout
        assert "gRPC  " in done.stdout and "HTTP  " in done.stdout


def test_broken_models_fail_their_load_and_the_server_keeps_serving(repo, http, grpc_client):
    models = repo["root"] / "models"
    broken = models / "broken" / "1"
    broken.mkdir(parents=True, exist_ok=True)     # each gRPC listener's run starts broken
    (broken / "model.popef").write_bytes(b"not a popef")
    status, message = _http_error(lambda: http.load_model("broken"))
    assert status == "400" and "model.popef" in message, message
    assert http.is_model_ready("mlp")
    shutil.copy(models / "mlp" / "1" / "model.popef", broken / "model.popef")
    os.utime(broken / "model.popef", (1e9 + 1, 1e9 + 1))   # a new file: retried
    http.load_model("broken")
    assert grpc_client.is_model_ready("broken")
    grpc_client.unload_model("broken")

    odd = models / "odd"
    shutil.copytree(models / "mlp", odd, dirs_exist_ok=True)
    (odd / "config.pbtxt").write_text("sequence_batching { }\n")
    status, message = _http_error(lambda: grpc_client.load_model("odd"))
    assert "config.pbtxt" in message and "sequence_batching" in message, message
    (odd / "config.pbtxt").write_text("instance_group { gpus: [0, 1] }\n")   # retried
    status, message = _http_error(lambda: http.load_model("odd"))
    assert "devices [0, 1]" in message, message
    (odd / "config.pbtxt").write_text('input { name: "nope" data_type: TYPE_FP32 dims: [1] }\n')
    status, message = _http_error(lambda: http.load_model("odd"))
    assert "'nope'" in message, message
    assert http.is_server_live() and http.is_model_ready("mlp")
    http.unload_model("odd")          # the server is ready again (every model has a version)
    assert http.is_server_ready()


def _with_unknown_attribute(popef: bytes, name: str) -> bytes:
    """The PopEF with attribute `name` added to its first kernel step (a newer compiler's file)."""
    blobs = []
    for blob in PopefFile(popef).blobs:
        payload = bytes(blob.payload)
        if blob.type == BlobType.EXECUTABLE:
            doc = json.loads(payload)
            doc["programs"]["main"][0].setdefault("attrs", {})[name] = 1
            payload = json_payload(doc)
        blobs.append((blob.type, blob.name, payload))
    return encode_popef(blobs)


def test_a_popef_with_an_unknown_attribute_fails_its_load_and_the_server_keeps_serving(repo, http):
    models = repo["root"] / "models"
    newer = models / "newer" / "1"
    newer.mkdir(parents=True, exist_ok=True)
    popef = (models / "mlp" / "1" / "model.popef").read_bytes()
    (newer / "model.popef").write_bytes(_with_unknown_attribute(popef, "future_attribute"))
    status, message = _http_error(lambda: http.load_model("newer"))
    assert status == "400" and "unknown attribute 'future_attribute'" in message, message
    assert "newer compiler" in message, message
    assert http.is_server_live() and http.is_model_ready("mlp")
    x = _rows(2, 7)
    np.testing.assert_allclose(http.infer("mlp", _http_inputs({"x": x})).as_numpy("logits"),
                               mlp_reference(repo["mlp_onnx"], x), rtol=1e-5, atol=1e-5)
    shutil.rmtree(models / "newer")


def test_raw_http_paths_with_a_slash_in_the_model_name(server):
    body = {"inputs": [{"name": "X", "datatype": "FP32", "shape": [1, 2], "data": [1, 2]},
                       {"name": "Y", "datatype": "FP32", "shape": [1, 2], "data": [[3, 4]]}],
            "id": "plain"}
    for path in ("/v2/models/fused/adder/infer", "/v2/models/fused%2Fadder/versions/1/infer"):
        status, answer = server.http("POST", path, body)
        assert status == 200, answer
        assert answer["outputs"] == [{"name": "O", "datatype": "FP32", "shape": [2],
                                      "data": [4.0, 6.0]}] and answer["id"] == "plain"
        assert answer["model_name"] == "fused/adder" and answer["model_version"] == "1"
    assert server.http("GET", "/v2/models/fused/concat/versions/1/ready")[0] == 200
    assert server.http("GET", "/v2/models/fused/nope/ready")[0] == 400
    status, answer = server.http("GET", "/v2")
    assert status == 200 and answer["name"] == "tf-popef"


# ---- the two gRPC listeners against each other -------------------------------------------------
@pytest.fixture(scope="module")
def grpc_clients(server):
    clients = {listener: grpcclient.InferenceServerClient(_grpc_address(server, listener))
               for listener in LISTENERS}
    yield clients
    for client in clients.values():
        client.close()


def test_both_grpc_listeners_refuse_bad_requests_alike(grpc_clients):
    x = _rows(1)
    cases = [("mlp", {"x": x.astype(np.float64)}, "", None),             # datatype
             ("mlp", {"x": x[:, :5]}, "", None),                          # shape
             ("mlp", {"z": x}, "", None),                                 # name
             ("fused/adder", {"X": np.ones((1, 2), np.float32)}, "", None),   # missing input
             ("mlp", {"x": _rows(9)}, "", None),                          # past max_batch_size
             ("mlp", {"x": x}, "", ["probs"]),                            # unknown output
             ("nope", {"x": x}, "", None), ("mlp", {"x": x}, "3", None),
             ("fused/nope", {"x": x}, "", None), ("mlp", {"x": x}, "v1", None)]
    for model, arrays, version, outputs in cases:
        requested = [grpcclient.InferRequestedOutput(n) for n in outputs] if outputs else None
        answers = {listener: _http_error(lambda: client.infer(
            model, _grpc_inputs(arrays), model_version=version, outputs=requested))
            for listener, client in grpc_clients.items()}
        assert answers["port"] == answers["grpc_inference_port"], (model, answers)
        assert answers["port"][0] in ("StatusCode.INVALID_ARGUMENT", "StatusCode.NOT_FOUND")


def _metric(server, name: str, **labels) -> float:
    text = urllib.request.urlopen(server.url("/metrics"), timeout=30).read().decode()
    return sum(sample.value for family in text_string_to_metric_families(text)
               for sample in family.samples
               if sample.name in (name, name + "_total") and all(
                   sample.labels.get(k) == v for k, v in labels.items()))


def test_native_fast_path_takes_bare_popef_inference_only(server, grpc_clients, repo):
    native, python = grpc_clients["grpc_inference_port"], grpc_clients["port"]
    counter = ":tfpopef:server:native_fast_path_requests"
    before = {m: _metric(server, counter, model_name=m)
              for m in ("mlp", "spare", "fused", "affine")}
    x = _rows(2, 5)
    for _ in range(3):
        np.testing.assert_allclose(native.infer("mlp", _grpc_inputs({"x": x})).as_numpy("logits"),
                                   mlp_reference(repo["mlp_onnx"], x), rtol=1e-5, atol=1e-5)
    # "spare" runs each request alone: 2 rows are zero-padded to its compiled batch of 4
    spare = native.infer("spare", _grpc_inputs({"x": x})).as_numpy("logits")
    assert spare.shape == (2, CLASSES)
    np.testing.assert_allclose(spare, mlp_reference(repo["mlp_onnx"], x), rtol=1e-5, atol=1e-5)
    native.infer("fused/concat", _grpc_inputs({"X": np.ones((1, 1), np.float16)}))
    python.infer("mlp", _grpc_inputs({"x": x}))                          # the Python listener
    native.infer("affine", _grpc_inputs({"x": np.ones((1, 2), np.float32)}))   # a SavedModel
    with pytest.raises(InferenceServerException):
        native.infer("mlp", _grpc_inputs({"x": x[:, :3]}))               # refused: delegated
    after = {m: _metric(server, counter, model_name=m) for m in before}
    assert after == dict(before, mlp=before["mlp"] + 3, spare=before["spare"] + 1,
                         fused=before["fused"] + 1)
    # One process holds TensorFlow (serving `affine`) and the native module with its protobuf.
    with open(f"/proc/{server.process.pid}/maps", encoding="utf-8") as handle:
        maps = handle.read()
    assert "_kserve_native" in maps and "libtensorflow" in maps and "libprotobuf" in maps


def test_native_fast_path_follows_a_version_rollout(server, grpc_clients, repo):
    """A new version on disk replaces the old one (latest policy): the native listener's fast
    path answers with it as soon as it is available, and counts it under its version."""
    native = grpc_clients["grpc_inference_port"]
    counter = ":tfpopef:server:native_fast_path_requests"
    x = _rows(1, 3)
    before = _metric(server, counter, model_name="rollout")
    assert native.infer("rollout", _grpc_inputs({"x": x})).get_response().model_version == "1"
    shutil.copytree(repo["root"] / "models" / "rollout" / "1",
                    repo["root"] / "models" / "rollout" / "2")
    wait_until(lambda: native.get_model_metadata("rollout", as_json=True)["versions"] == ["2"],
               what="version 2 of rollout replacing version 1")
    result = native.infer("rollout", _grpc_inputs({"x": x}))
    assert result.get_response().model_version == "2"
    np.testing.assert_allclose(result.as_numpy("logits"), mlp_reference(repo["mlp_onnx"], x),
                               rtol=1e-5, atol=1e-5)
    assert _metric(server, counter, model_name="rollout") == before + 2
    stats = native.get_inference_statistics("rollout", "2", as_json=True)["model_stats"]
    assert int(stats[0]["inference_stats"]["success"]["count"]) == 1
