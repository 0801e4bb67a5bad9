"""One server, one model with three signatures: gRPC (official stubs) and REST answers, TF
Serving's JSON shapes and error codes."""
import base64

import grpc
import numpy as np
import pytest
import tensorflow as tf
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tensorflow_serving.apis import (get_model_metadata_pb2, get_model_status_pb2,
                                     model_service_pb2_grpc, predict_pb2,
                                     prediction_service_pb2_grpc)

from serving_harness import ServerProcess
from serving_models import expected_affine, save_affine

MODEL = "affine"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("predict")
    save_affine(str(root / "models" / MODEL / "1"))
    process = ServerProcess(root / "server", f"--model_name={MODEL}",
                            f"--model_base_path={root / 'models' / MODEL}",
                            "--enable_grpc_healthcheck_service",
                            "--tensorflow_intra_op_parallelism=2").start()
    yield process
    assert process.stop() == 0, process.log()


def _predict_request(signature="", **inputs):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = MODEL
    request.model_spec.signature_name = signature
    for name, value in inputs.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
    return request


def _stub(server):
    return prediction_service_pb2_grpc.PredictionServiceStub(server.channel)


# ---- gRPC -------------------------------------------------------------------------------
def test_grpc_predict_default_signature(server):
    x = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    response = _stub(server).Predict(_predict_request(x=x), timeout=30)
    np.testing.assert_array_equal(tf.make_ndarray(response.outputs["y"]), expected_affine(x))
    assert response.model_spec.name == MODEL
    assert response.model_spec.version.value == 1
    assert response.model_spec.signature_name == "serving_default"


def test_grpc_predict_every_signature_and_output_filter(server):
    text = np.array([b"ab", b"xyz"], object)
    numbers = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    response = _stub(server).Predict(_predict_request("two_io", text=text, numbers=numbers),
                                     timeout=30)
    assert set(response.outputs) == {"length", "total", "echo_bytes"}
    np.testing.assert_array_equal(tf.make_ndarray(response.outputs["length"]), [2, 3])
    np.testing.assert_array_equal(tf.make_ndarray(response.outputs["total"]), [6, 15])
    request = _predict_request("two_io", text=text, numbers=numbers)
    request.output_filter.append("total")
    filtered = _stub(server).Predict(request, timeout=30)
    assert list(filtered.outputs) == ["total"]
    x = np.ones([1, 2], np.float32)
    slow = _stub(server).Predict(_predict_request("slow", x=x), timeout=30)
    np.testing.assert_array_equal(tf.make_ndarray(slow.outputs["y"]), expected_affine(x))


@pytest.mark.parametrize("mutate, code, fragment", [
    (lambda r: setattr(r.model_spec, "name", "nope"), grpc.StatusCode.NOT_FOUND,
     "Servable not found for request: Latest(nope)"),
    (lambda r: r.model_spec.version.__setattr__("value", 9), grpc.StatusCode.NOT_FOUND,
     "Specific(affine, 9)"),
    (lambda r: setattr(r.model_spec, "signature_name", "nope"),
     grpc.StatusCode.INVALID_ARGUMENT, 'Serving signature key "nope" not found.'),
    (lambda r: setattr(r.model_spec, "version_label", "stable"),
     grpc.StatusCode.INVALID_ARGUMENT, "Unrecognized servable version label: stable"),
    (lambda r: r.output_filter.append("nope"), grpc.StatusCode.INVALID_ARGUMENT,
     "output tensor alias not found in signature: nope"),
    (lambda r: r.inputs["x"].CopyFrom(tf.make_tensor_proto(np.ones([2, 3], np.float32))),
     grpc.StatusCode.INVALID_ARGUMENT, "has shape [2,3] but signature 'serving_default' expects"),
    (lambda r: r.inputs["x"].CopyFrom(tf.make_tensor_proto(np.ones([2, 2], np.float64))),
     grpc.StatusCode.INVALID_ARGUMENT, "dtype DT_DOUBLE but signature"),
    (lambda r: r.inputs["extra"].CopyFrom(tf.make_tensor_proto(1.0)),
     grpc.StatusCode.INVALID_ARGUMENT, "Sent extra: {extra}"),
    (lambda r: r.inputs.pop("x"), grpc.StatusCode.INVALID_ARGUMENT,
     "Missing but required: {x}"),
])
def test_grpc_predict_errors(server, mutate, code, fragment):
    request = _predict_request(x=np.ones([2, 2], np.float32))
    mutate(request)
    with pytest.raises(grpc.RpcError) as caught:
        _stub(server).Predict(request, timeout=30)
    assert caught.value.code() == code
    assert fragment in caught.value.details()


def test_grpc_metadata_matches_saved_model(server):
    request = get_model_metadata_pb2.GetModelMetadataRequest()
    request.model_spec.name = MODEL
    request.metadata_field.append("signature_def")
    response = _stub(server).GetModelMetadata(request, timeout=30)
    signatures = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(signatures)
    assert set(signatures.signature_def) == {"serving_default", "two_io", "slow"}
    default = signatures.signature_def["serving_default"]
    assert default.method_name == "tensorflow/serving/predict"
    assert default.inputs["x"].dtype == tf.float32.as_datatype_enum
    assert [d.size for d in default.inputs["x"].tensor_shape.dim] == [-1, 2]
    assert response.model_spec.version.value == 1
    request.metadata_field[0] = "nope"
    with pytest.raises(grpc.RpcError) as caught:
        _stub(server).GetModelMetadata(request, timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


def test_grpc_model_status(server):
    stub = model_service_pb2_grpc.ModelServiceStub(server.channel)
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = MODEL
    response = stub.GetModelStatus(request, timeout=30)
    assert [(s.version, s.state) for s in response.model_version_status] == [
        (1, get_model_status_pb2.ModelVersionStatus.AVAILABLE)]
    request.model_spec.name = "nope"
    with pytest.raises(grpc.RpcError) as caught:
        stub.GetModelStatus(request, timeout=30)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert "Could not find any versions of model nope" in caught.value.details()


def test_grpc_health_service(server):
    stub = health_pb2_grpc.HealthStub(server.channel)
    for service in ("", "tensorflow.serving.PredictionService"):
        answer = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
    with pytest.raises(grpc.RpcError) as caught:
        stub.Check(health_pb2.HealthCheckRequest(service="nope"), timeout=10)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


# ---- REST -------------------------------------------------------------------------------
def test_rest_status_and_metadata(server):
    for path in (f"/v1/models/{MODEL}", f"/v1/models/{MODEL}/versions/1"):
        status, body = server.http("GET", path)
        assert status == 200
        assert body == {"model_version_status": [{
            "version": "1", "state": "AVAILABLE",
            "status": {"error_code": "OK", "error_message": ""}}]}
    status, body = server.http("GET", f"/v1/models/{MODEL}/metadata")
    assert status == 200
    assert body["model_spec"] == {"name": MODEL, "signature_name": "", "version": "1"}
    x_info = body["metadata"]["signature_def"]["signature_def"]["serving_default"]["inputs"]["x"]
    assert x_info["dtype"] == "DT_FLOAT"
    assert [d["size"] for d in x_info["tensor_shape"]["dim"]] == ["-1", "2"]


def test_rest_predict_row_and_columnar(server):
    x = [[1.5, 2.0], [0.1, -3.0]]
    status, body = server.http("POST", f"/v1/models/{MODEL}:predict", {"instances": x})
    assert status == 200
    np.testing.assert_allclose(body["predictions"], expected_affine(x), rtol=1e-6)
    status, body = server.http("POST", f"/v1/models/{MODEL}/versions/1:predict",
                               {"inputs": {"x": x}})
    assert status == 200
    np.testing.assert_allclose(body["outputs"], expected_affine(x), rtol=1e-6)
    # float32 results are printed with their shortest text, as TF Serving does.
    status, body = server.http("POST", f"/v1/models/{MODEL}:predict", {"inputs": [[0.05, 0]]})
    assert body == {"outputs": [[1.1, 1.0]]}


def test_rest_predict_multiple_io_and_b64(server):
    payload = {"signature_name": "two_io", "instances": [
        {"text": {"b64": base64.b64encode(b"\x00\xffab").decode()}, "numbers": [1, 2, 3]},
        {"text": "hello", "numbers": [4, 5, 6]}]}
    status, body = server.http("POST", f"/v1/models/{MODEL}:predict", payload)
    assert status == 200, body
    assert body["predictions"][0]["length"] == 4 and body["predictions"][1]["length"] == 5
    assert [row["total"] for row in body["predictions"]] == [6, 15]
    # outputs named *_bytes come back as {"b64": ...}
    assert base64.b64decode(body["predictions"][0]["echo_bytes"]["b64"]) == b"\x00\xffab"
    columnar = {"signature_name": "two_io",
                "inputs": {"text": ["a", "bb"], "numbers": [[1, 1, 1], [2, 2, 2]]}}
    status, body = server.http("POST", f"/v1/models/{MODEL}:predict", columnar)
    assert status == 200
    assert body["outputs"]["length"] == [1, 2] and body["outputs"]["total"] == [3, 6]


@pytest.mark.parametrize("path, payload, status, fragment", [
    (f"/v1/models/{MODEL}:predict", b'{"instances": [[1, 2]', 400, "JSON Parse error"),
    (f"/v1/models/{MODEL}:predict", b"", 400, "JSON Parse error"),
    (f"/v1/models/{MODEL}:predict", {"instances": [[1, 2, 3]]}, 400,
     "has shape [1,3] but signature"),
    (f"/v1/models/{MODEL}:predict", {"instances": [[1, 2], [3]]}, 400, "input 'x'"),
    (f"/v1/models/{MODEL}:predict", {"instances": [["a", "b"]]}, 400, "string or object"),
    (f"/v1/models/{MODEL}:predict", {"foo": 1}, 400, "Missing 'inputs' or 'instances' key"),
    (f"/v1/models/{MODEL}:predict", {"instances": [[1, 2]], "inputs": [[1, 2]]}, 400,
     "Not both"),
    (f"/v1/models/{MODEL}:predict", {"signature_name": "nope", "instances": [[1, 2]]}, 400,
     'Serving signature key "nope" not found.'),
    (f"/v1/models/{MODEL}:predict", {"signature_name": "two_io", "instances": ["a"]}, 400,
     "give them by name"),
    ("/v1/models/nope:predict", {"instances": [[1, 2]]}, 404,
     "Servable not found for request: Latest(nope)"),
    (f"/v1/models/{MODEL}/versions/3:predict", {"instances": [[1, 2]]}, 404,
     "Specific(affine, 3)"),
    (f"/v1/models/{MODEL}/versions/x:predict", {"instances": [[1, 2]]}, 400,
     "Malformed version"),
    (f"/v1/models/{MODEL}:explain", {"instances": [[1, 2]]}, 400, "Malformed request"),
])
def test_rest_errors(server, path, payload, status, fragment):
    code, body = server.http("POST", path, payload)
    assert code == status, body
    assert set(body) == {"error"} and fragment in body["error"], body


def test_rest_unknown_model_status(server):
    code, body = server.http("GET", "/v1/models/nope")
    assert code == 404
    assert body == {"error": "Could not find any versions of model nope"}
