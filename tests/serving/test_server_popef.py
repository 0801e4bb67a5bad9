"""The server loads the PopefExecute op at start and serves SavedModels exported from PopEF
files (serving.export): every signature of a fused PopEF, over gRPC and REST, checked against
the original models' results."""
import os
import sys

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from serving_harness import REPO, ServerProcess

sys.path.insert(0, os.path.join(REPO, "tests", "op"))
from popef_models import compile_add_model, compile_fused_example, expected_fused  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from serving.export import export_saved_model
    root = tmp_path_factory.mktemp("popef")
    fused = compile_fused_example(str(root / "fused"), names=["adder", "concat"])
    add = compile_add_model(str(root / "add"), batch=4)
    export_saved_model(fused, str(root / "models" / "fused" / "1"))
    export_saved_model(add, str(root / "models" / "add" / "1"))
    config = root / "models.config"
    config.write_text(f"""model_config_list {{
      config {{ name: "fused" base_path: "{root / 'models' / 'fused'}" model_platform: "tensorflow" }}
      config {{ name: "add" base_path: "{root / 'models' / 'add'}" model_platform: "tensorflow" }}
    }}""")
    process = ServerProcess(root / "server", f"--model_config_file={config}").start()
    yield process
    assert process.stop() == 0, process.log()


def _predict(server, model, signature, **inputs):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature
    for name, value in inputs.items():
        request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel)
    return {k: tf.make_ndarray(v) for k, v in stub.Predict(request, timeout=60).outputs.items()}


def test_op_library_loaded_at_start(server):
    assert "Loaded custom op library" in server.log() and "_popef_ops.so" in server.log()


def test_grpc_every_signature_of_the_fused_model(server):
    x = np.array([[1.0, 2.0]], np.float32)
    y = np.array([[2.0, 1.0]], np.float32)
    for signature in ("", "serving_default", "adder"):
        out = _predict(server, "fused", signature, X=x, Y=y)
        np.testing.assert_array_equal(out["O"], expected_fused(0, x, y))
    h = np.array([[0.0], [4.0], [-1.0]], np.float16)
    out = _predict(server, "fused", "concat", X=h)
    assert out["O"].dtype == np.float16
    np.testing.assert_array_equal(out["O"], expected_fused(1, h))


def test_grpc_dynamic_batch_sizes(server):
    for rows in (1, 4, 7):
        x = np.random.default_rng(rows).standard_normal((rows, 2)).astype(np.float32)
        y = np.ones_like(x)
        np.testing.assert_array_equal(_predict(server, "add", "", X=x, Y=y)["O"], x + y)


def test_rest_every_signature(server):
    status, body = server.http("POST", "/v1/models/fused:predict", {
        "signature_name": "adder", "inputs": {"X": [[1, 2]], "Y": [[3, 4]]}})
    assert status == 200 and body == {"outputs": [4.0, 6.0]}
    status, body = server.http("POST", "/v1/models/fused:predict", {
        "signature_name": "concat", "instances": [[0.5], [1.0]]})
    assert status == 200 and body == {"predictions": [[0.5, 1.5, 2.0], [1.0, 1.5, 2.0]]}
    status, body = server.http("POST", "/v1/models/add:predict", {
        "instances": [{"X": [1, 2], "Y": [10, 20]}, {"X": [3, 4], "Y": [30, 40]}]})
    assert status == 200 and body == {"predictions": [[11.0, 22.0], [33.0, 44.0]]}
    # adder's output [2] has no batch axis; like TF Serving the row format takes its first
    # dimension as the rows (outputs are only checked against each other).
    status, body = server.http("POST", "/v1/models/fused:predict", {
        "signature_name": "adder", "instances": [{"X": [1, 2], "Y": [3, 4]}]})
    assert status == 200 and body == {"predictions": [4.0, 6.0]}


def test_rest_metadata_lists_the_subgraph_signatures(server):
    status, body = server.http("GET", "/v1/models/fused/metadata")
    assert status == 200
    assert set(body["metadata"]["signature_def"]["signature_def"]) == {
        "serving_default", "adder", "concat"}
