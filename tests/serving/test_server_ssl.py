"""--ssl_config_file: gRPC over TLS with TF Serving's SSLConfig text format (openssl makes a
self-signed certificate for localhost), on `--port` and on the native KServe v2 listener."""
import json
import shutil
import subprocess

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from serving_harness import ServerProcess, free_port
from serving_models import expected_affine, save_affine


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("ssl")
    openssl = shutil.which("openssl")
    assert openssl, "the openssl command is needed to make the test certificate"
    key, cert = root / "server.key", root / "server.crt"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True,
                   timeout=60)
    config = root / "ssl.config"
    # JSON string escapes are valid text-format string escapes.
    config.write_text(f"server_key: {json.dumps(key.read_text())}\n"
                      f"server_cert: {json.dumps(cert.read_text())}\nclient_verify: false\n")
    save_affine(str(root / "models" / "m" / "1"))
    server = ServerProcess(root / "server", "--model_name=m",
                           f"--model_base_path={root / 'models' / 'm'}",
                           f"--ssl_config_file={config}", f"--grpc_inference_port={free_port()}",
                           rest=False).start()
    server.cert = cert.read_bytes()
    yield server
    assert server.stop() == 0, server.log()


def _request():
    request = predict_pb2.PredictRequest()
    request.model_spec.name = "m"
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(np.ones([1, 2], np.float32)))
    return request


def test_tls_predict(tls_server):
    credentials = grpc.ssl_channel_credentials(root_certificates=tls_server.cert)
    with grpc.secure_channel(f"127.0.0.1:{tls_server.grpc_port}", credentials,
                             options=[("grpc.ssl_target_name_override", "localhost")]) as channel:
        answer = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(
            _request(), timeout=30)
    np.testing.assert_array_equal(tf.make_ndarray(answer.outputs["y"]),
                                  expected_affine(np.ones([1, 2])))


def test_plaintext_client_is_refused(tls_server):
    with grpc.insecure_channel(f"127.0.0.1:{tls_server.grpc_port}") as channel:
        with pytest.raises(grpc.RpcError) as caught:
            prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(
                _request(), timeout=10)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


# inference.GRPCInferenceService/ServerLive, raw: an empty request, and `live: true` back (this
# process may hold tritonclient's protos, which clash with the server's generated ones).
SERVER_LIVE = "/inference.GRPCInferenceService/ServerLive"
LIVE_TRUE = b"\x08\x01"


def test_tls_on_the_native_kserve_listener(tls_server):
    credentials = grpc.ssl_channel_credentials(root_certificates=tls_server.cert)
    address = f"127.0.0.1:{tls_server.grpc_inference_port}"
    with grpc.secure_channel(address, credentials,
                             options=[("grpc.ssl_target_name_override", "localhost")]) as channel:
        assert channel.unary_unary(SERVER_LIVE)(b"", timeout=30) == LIVE_TRUE
    with grpc.insecure_channel(address) as channel:
        with pytest.raises(grpc.RpcError) as caught:
            channel.unary_unary(SERVER_LIVE)(b"", timeout=10)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
