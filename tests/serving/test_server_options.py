"""Flags and config files that change what a running server does: TF Serving's gRPC message
limit (a 6 MiB Predict with the official stub), gRPC on a UNIX socket, CORS, ignored flags
warning at start, the signature method_name check off by default, --platform_config_file
and per-model batching parameters."""
import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import (classification_pb2, predict_pb2,
                                     prediction_service_pb2_grpc)

from serving_harness import ServerProcess
from serving_models import expected_affine, save_affine

LARGE_MESSAGES = [("grpc.max_send_message_length", 64 << 20),
                  ("grpc.max_receive_message_length", 64 << 20)]
IGNORED = ["--per_process_gpu_memory_fraction=0.5", "--xla_cpu_compilation_enabled=true",
           "--prefer_tflite_model=false", "--flush_filesystem_caches=true"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("options")
    save_affine(str(root / "models" / "m" / "1"))
    socket_path = root / "grpc.sock"
    process = ServerProcess(root / "server", "--model_name=m",
                            f"--model_base_path={root / 'models' / 'm'}",
                            f"--grpc_socket_path={socket_path}",
                            "--rest_api_enable_cors_support", "--tensorflow_session_parallelism=1",
                            *IGNORED).start()
    process.socket_path = socket_path
    yield process
    assert process.stop() == 0, process.log()


def _predict(channel, x, signature=""):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "m"
    request.model_spec.signature_name = signature
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(x))
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    return tf.make_ndarray(stub.Predict(request, timeout=60).outputs["y"])


def test_6_mib_predict_with_default_flags(server):
    x = np.random.default_rng(0).standard_normal((6 << 20) // 8, dtype=np.float32).reshape(-1, 2)
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}", options=LARGE_MESSAGES) as ch:
        np.testing.assert_array_equal(_predict(ch, x), expected_affine(x))


def test_grpc_on_the_unix_socket(server):
    x = np.array([[1.0, 2.0]], np.float32)
    with grpc.insecure_channel(f"unix:{server.socket_path}") as channel:
        np.testing.assert_array_equal(_predict(channel, x), expected_affine(x))


def test_cors_headers_and_preflight(server):
    import urllib.error
    import urllib.request
    request = urllib.request.Request(server.url("/v1/models/m:predict"), method="OPTIONS",
                                     headers={"Origin": "http://example.com",
                                              "Access-Control-Request-Method": "POST"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200
        assert response.headers["Access-Control-Allow-Origin"] == "*"
        assert "POST" in response.headers["Access-Control-Allow-Methods"]
        assert "Content-Type" in response.headers["Access-Control-Allow-Headers"]
    request = urllib.request.Request(server.url("/v1/models/m"))
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.headers["Access-Control-Allow-Origin"] == "*"
    with pytest.raises(urllib.error.HTTPError) as caught:   # errors carry it too
        urllib.request.urlopen(server.url("/v1/models/nope"), timeout=30)
    assert caught.value.code == 404
    assert caught.value.headers["Access-Control-Allow-Origin"] == "*"


def test_ignored_flags_warn_once_each_at_start(server):
    log = server.log()
    for flag in IGNORED:
        name = flag[2:].split("=")[0]
        assert log.count(f"--{name} is accepted but ignored: ") == 1, log


def test_method_name_check_is_off_by_default(server):
    """TF Serving's default: a Classify on a predict signature is judged by its inputs and
    outputs, not refused for its method_name."""
    request = classification_pb2.ClassificationRequest()
    request.model_spec.name = "m"
    request.input.example_list.examples.add()
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel)
    with pytest.raises(grpc.RpcError) as caught:
        stub.Classify(request, timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "method_name" not in caught.value.details()
    assert "classes or scores" in caught.value.details()


PLATFORM_CONFIG = """
platform_configs {
  key: "tensorflow"
  value {
    source_adapter_config {
      [type.googleapis.com/tensorflow.serving.SavedModelBundleSourceAdapterConfig] {
        legacy_config {
          batching_parameters { max_batch_size { value: 8 } num_batch_threads { value: 1 } }
          session_config { intra_op_parallelism_threads: 1 inter_op_parallelism_threads: 1 }
          session_target: "ignored-target"
        }
      }
    }
  }
}
"""


def test_platform_config_and_per_model_batching_parameters(tmp_path):
    """Batching comes from the platform config (no --enable_batching); the version with a
    batching_params.pbtxt gets its own limit."""
    models = tmp_path / "models"
    save_affine(str(models / "small" / "1"))
    (models / "small" / "1" / "batching_params.pbtxt").write_text("max_batch_size { value: 2 }")
    save_affine(str(models / "large" / "1"))
    config = tmp_path / "models.config"
    config.write_text("model_config_list {" + "".join(
        f' config {{ name: "{n}" base_path: "{models / n}" model_platform: "tensorflow" }}'
        for n in ("small", "large")) + " }")
    platform = tmp_path / "platform.config"
    platform.write_text(PLATFORM_CONFIG)
    server = ServerProcess(tmp_path / "server", f"--model_config_file={config}",
                           f"--platform_config_file={platform}",
                           "--enable_per_model_batching_parameters", rest=False).start()
    try:
        stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel)

        def predict(name, rows):
            request = predict_pb2.PredictRequest()
            request.model_spec.name = name
            request.inputs["x"].CopyFrom(tf.make_tensor_proto(np.ones((rows, 2), np.float32)))
            return stub.Predict(request, timeout=30)
        for name, limit in (("small", 2), ("large", 8)):
            assert tf.make_ndarray(predict(name, limit).outputs["y"]).shape == (limit, 2)
            with pytest.raises(grpc.RpcError) as caught:
                predict(name, limit + 1)
            assert f"larger than maximum input batch size {limit}" in caught.value.details()
        log = server.log()
    finally:
        assert server.stop() == 0, server.log()
    assert "session_target is accepted but ignored" in log, log
