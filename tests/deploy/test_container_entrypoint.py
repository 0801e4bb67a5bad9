"""The container's entrypoint (deploy/docker/entrypoint.sh) builds tensorflow/serving's command
line from MODEL_NAME / MODEL_BASE_PATH and starts the real server with it: a PopEF SavedModel
in a temp dir answers gRPC (official tensorflow-serving-api stubs) and REST predicts, with
random ports passed through as extra arguments, exactly as `podman run IMAGE --flag` does."""
import os
import stat
import subprocess
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "op"))
sys.path.insert(0, os.path.join(REPO, "tests", "serving"))
from popef_models import compile_add_model, export_fresh  # noqa: E402
from serving_harness import ServerProcess  # noqa: E402

ENTRYPOINT = os.path.join(REPO, "deploy", "docker", "entrypoint.sh")


def _server_on_path(folder, body: str) -> dict:
    """A PATH whose `tensorflow_model_server` runs `body` (the image links the real server
    under that name); returns the environment to run the entrypoint with."""
    os.makedirs(folder, exist_ok=True)
    program = os.path.join(folder, "tensorflow_model_server")
    with open(program, "w", encoding="utf-8") as handle:
        handle.write("#!/bin/sh\n" + body + "\n")
    os.chmod(program, os.stat(program).st_mode | stat.S_IXUSR)
    return {"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def test_command_line_is_tensorflow_serving_s_with_defaults_and_extra_flags(tmp_path):
    env = dict(os.environ, **_server_on_path(str(tmp_path / "bin"), 'printf "%s\\n" "$@"'))
    env.pop("MODEL_NAME", None)
    env.pop("MODEL_BASE_PATH", None)
    defaults = subprocess.run(["sh", ENTRYPOINT], env=env, capture_output=True, text=True,
                              check=True).stdout.splitlines()
    assert defaults == ["--port=8500", "--rest_api_port=8501", "--model_name=model",
                        "--model_base_path=/models/model"]
    env.update(MODEL_NAME="resnet", MODEL_BASE_PATH="/mnt/my models")
    given = subprocess.run(["sh", ENTRYPOINT, "--enable_batching", "--port=9000"], env=env,
                           capture_output=True, text=True, check=True).stdout.splitlines()
    assert given == ["--port=8500", "--rest_api_port=8501", "--model_name=resnet",
                     "--model_base_path=/mnt/my models/resnet", "--enable_batching", "--port=9000"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("entrypoint")
    popef = compile_add_model(str(root / "popef"), batch=4)
    export_fresh(popef, str(root / "models" / "adder" / "1"))
    server = ServerProcess(root / "server", env=dict(
        _server_on_path(str(root / "bin"), f'exec "{sys.executable}" -m serving.model_server "$@"'),
        MODEL_NAME="adder", MODEL_BASE_PATH=str(root / "models")))
    # What `podman run IMAGE <args>` appends: free ports (the last --port wins), loopback only.
    server.args = ["sh", ENTRYPOINT, "--port=0", f"--rest_api_port={server.rest_port}",
                   "--bind_address=127.0.0.1", f"--port_file={server.port_file}"]
    server.start()
    yield server
    assert server.stop() == 0, server.log()


def test_entrypoint_execs_the_server_so_it_receives_signals(served):
    with open(f"/proc/{served.process.pid}/cmdline", "rb") as handle:
        argv = handle.read().split(b"\0")
    assert b"serving.model_server" in argv and b"--model_name=adder" in argv


def test_rest_and_grpc_predict_through_the_entrypoint(served):
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
    import tensorflow as tf

    x = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    y = np.array([[0.5, -1], [2, 0.25], [-3, 8]], np.float32)
    status, body = served.http("GET", "/v1/models/adder")
    assert status == 200, body
    assert [v["state"] for v in body["model_version_status"]] == ["AVAILABLE"]
    status, body = served.http("POST", "/v1/models/adder:predict",
                               {"inputs": {"X": x.tolist(), "Y": y.tolist()}})
    assert status == 200, body
    np.testing.assert_array_equal(np.array(body["outputs"], np.float32), x + y)

    request = predict_pb2.PredictRequest()
    request.model_spec.name = "adder"
    request.inputs["X"].CopyFrom(tf.make_tensor_proto(x))
    request.inputs["Y"].CopyFrom(tf.make_tensor_proto(y))
    stub = prediction_service_pb2_grpc.PredictionServiceStub(served.channel)
    response = stub.Predict(request, timeout=30)
    np.testing.assert_array_equal(tf.make_ndarray(response.outputs["O"]), x + y)
