"""Classify, Regress and MultiInference over gRPC and REST on a TF1 SavedModel with
classify/regress/predict signatures; predict signatures refuse them as TF Serving does."""
import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import (classification_pb2, inference_pb2, predict_pb2,
                                     prediction_service_pb2_grpc, regression_pb2)

from serving_harness import ServerProcess
from serving_models import save_affine, save_tf1_classify_regress

XS = [1.0, 2.0, -4.0]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("classify")
    save_tf1_classify_regress(str(root / "models" / "hpt" / "1"))
    save_affine(str(root / "models" / "affine" / "1"))
    config = root / "models.config"
    config.write_text(f"""model_config_list {{
      config {{ name: "hpt" base_path: "{root / 'models' / 'hpt'}" model_platform: "tensorflow" }}
      config {{ name: "affine" base_path: "{root / 'models' / 'affine'}" model_platform: "tensorflow" }}
    }}""")
    process = ServerProcess(root / "server", f"--model_config_file={config}",
                            "--enable_signature_method_name_check").start()
    yield process
    assert process.stop() == 0, process.log()


def _examples(input_proto, xs=XS):
    for x in xs:
        example = input_proto.example_list.examples.add()
        example.features.feature["x"].float_list.value.append(x)


def _stub(server):
    return prediction_service_pb2_grpc.PredictionServiceStub(server.channel)


def test_grpc_classify(server):
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "hpt"
    request.model_spec.signature_name = "classify"
    _examples(request.input)
    response = _stub(server).Classify(request, timeout=30)
    assert response.model_spec.signature_name == "classify"
    got = [[(c.label, c.score) for c in entry.classes]
           for entry in response.result.classifications]
    assert got == [[("low", 0.5 * x + 2), ("high", -(0.5 * x + 2))] for x in XS]


def test_grpc_regress_default_signature_and_context(server):
    request = regression_pb2.RegressionRequest()
    request.model_spec.name = "hpt"
    context = request.input.example_list_with_context
    context.context.features.feature["x"].float_list.value.append(10.0)
    context.examples.add()   # takes x from the context
    response = _stub(server).Regress(request, timeout=30)
    assert [r.value for r in response.result.regressions] == [7.0]


def test_grpc_multi_inference(server):
    request = inference_pb2.MultiInferenceRequest()
    for signature, method in (("classify", "tensorflow/serving/classify"),
                              ("serving_default", "tensorflow/serving/regress")):
        task = request.tasks.add()
        task.model_spec.name = "hpt"
        task.model_spec.signature_name = signature
        task.method_name = method
    _examples(request.input, [2.0])
    response = _stub(server).MultiInference(request, timeout=30)
    assert response.results[0].classification_result.classifications[0].classes[0].score == 3.0
    assert response.results[1].regression_result.regressions[0].value == 3.0
    request.tasks[1].model_spec.name = "affine"
    with pytest.raises(grpc.RpcError) as caught:
        _stub(server).MultiInference(request, timeout=30)
    assert "same model name" in caught.value.details()


@pytest.mark.parametrize("model, signature, fragment", [
    ("affine", "", "Expected classification signature method_name to be "
                   "tensorflow/serving/classify. Was: tensorflow/serving/predict"),
    ("hpt", "predict", "Was: tensorflow/serving/predict"),
    ("hpt", "nope", 'Serving signature key "nope" not found.'),
])
def test_grpc_classify_refuses_other_signatures(server, model, signature, fragment):
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    _examples(request.input)
    with pytest.raises(grpc.RpcError) as caught:
        _stub(server).Classify(request, timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert fragment in caught.value.details()


def test_grpc_empty_input(server):
    request = regression_pb2.RegressionRequest()
    request.model_spec.name = "hpt"
    with pytest.raises(grpc.RpcError) as caught:
        _stub(server).Regress(request, timeout=30)
    assert caught.value.details() == "Input is empty."


def test_predict_signature_of_tf1_model(server):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "hpt"
    request.model_spec.signature_name = "predict"
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(np.array([[2.0]], np.float32)))
    response = _stub(server).Predict(request, timeout=30)
    assert tf.make_ndarray(response.outputs["y"]).tolist() == [[3.0]]


def test_rest_classify_and_regress(server):
    status, body = server.http("POST", "/v1/models/hpt:classify", {
        "signature_name": "classify", "examples": [{"x": 2.0}, {"x": [4.0]}]})
    assert status == 200, body
    assert body == {"results": [[["low", 3.0], ["high", -3.0]], [["low", 4.0], ["high", -4.0]]]}
    status, body = server.http("POST", "/v1/models/hpt/versions/1:regress", {
        "context": {"x": 6.0}, "examples": [{}]})
    assert status == 200 and body == {"results": [5.0]}
    status, body = server.http("POST", "/v1/models/affine:regress", {"examples": [{"x": 1.0}]})
    assert status == 400 and "tensorflow/serving/regress" in body["error"]
    status, body = server.http("POST", "/v1/models/hpt:regress", {"examples": []})
    assert status == 400 and "non-empty" in body["error"]
