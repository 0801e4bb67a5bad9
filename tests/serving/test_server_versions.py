"""Version polling and policies, version labels, config files and ReloadConfig, model status
through its states, and a version swap under continuous load without a failed request."""
import os
import shutil
import threading

import grpc
import numpy as np
import pytest
import tensorflow as tf
from google.protobuf import text_format
from tensorflow_serving.apis import (get_model_status_pb2, model_management_pb2,
                                     model_service_pb2_grpc, predict_pb2,
                                     prediction_service_pb2_grpc)

from serving_harness import ServerProcess, wait_until
from serving_models import expected_affine, save_affine

State = get_model_status_pb2.ModelVersionStatus.State
X = np.array([[1.0, 2.0]], np.float32)


def _drop_version(base, version, scale):
    """Saves next to the base path, then renames in: the poller never sees half a model."""
    staging = os.path.join(os.path.dirname(base), f".staging-{os.path.basename(base)}-{version}")
    save_affine(staging, scale=scale)
    os.makedirs(base, exist_ok=True)
    os.rename(staging, os.path.join(base, str(version)))


def _grpc_predict(server, name, version=None, label=None):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    if version is not None:
        request.model_spec.version.value = version
    if label is not None:
        request.model_spec.version_label = label
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(X))
    stub = prediction_service_pb2_grpc.PredictionServiceStub(server.channel)
    response = stub.Predict(request, timeout=30)
    return response.model_spec.version.value, tf.make_ndarray(response.outputs["y"])


def _states(server, name):
    request = get_model_status_pb2.GetModelStatusRequest()
    request.model_spec.name = name
    stub = model_service_pb2_grpc.ModelServiceStub(server.channel)
    try:
        response = stub.GetModelStatus(request, timeout=30)
    except grpc.RpcError as error:
        return error.code()
    return {s.version: (s.state, s.status.error_message) for s in response.model_version_status}


def test_new_version_swaps_in_under_load_and_removed_version_swaps_back(tmp_path):
    base = str(tmp_path / "models" / "m")
    _drop_version(base, 1, scale=2.0)
    server = ServerProcess(tmp_path / "server", "--model_name=m", f"--model_base_path={base}",
                           "--file_system_poll_wait_seconds=1").start()
    try:
        failures, answered, stop = [], [], threading.Event()

        def load(protocol):
            while not stop.is_set():
                try:
                    if protocol == "grpc":
                        answered.append(_grpc_predict(server, "m")[0])
                    else:
                        status, body = server.http("POST", "/v1/models/m:predict",
                                                   {"instances": X.tolist()})
                        if status != 200:
                            failures.append((status, body))
                        answered.append(body["predictions"][0][0])
                except Exception as error:  # any failure fails the test below
                    failures.append(repr(error))

        clients = [threading.Thread(target=load, args=(p,)) for p in ("grpc", "grpc", "rest")]
        for client in clients:
            client.start()
        try:
            wait_until(lambda: len(answered) > 20, what="traffic on version 1")
            _drop_version(base, 2, scale=3.0)
            wait_until(lambda: _states(server, "m").get(1, (None,))[0] == State.END,
                       what="version 1 unloaded after version 2 loaded")
            before = len(answered)
            wait_until(lambda: len(answered) > before + 20, what="traffic on version 2")
        finally:
            stop.set()
            for client in clients:
                client.join(30)
        assert failures == []
        assert _states(server, "m") == {2: (State.AVAILABLE, ""), 1: (State.END, "")}
        version, y = _grpc_predict(server, "m")
        assert version == 2
        np.testing.assert_array_equal(y, expected_affine(X, scale=3.0))

        # A broken version is reported (END with its error) and version 2 keeps serving.
        os.makedirs(os.path.join(base, "3"))
        with open(os.path.join(base, "3", "saved_model.pb"), "wb") as handle:
            handle.write(b"not a SavedModel")
        wait_until(lambda: 3 in _states(server, "m"), what="version 3 attempted")
        state, message = _states(server, "m")[3]
        assert state == State.END and message
        assert _grpc_predict(server, "m")[0] == 2

        # Removing the newest versions makes version 1 the latest again.
        shutil.rmtree(os.path.join(base, "3"))
        shutil.rmtree(os.path.join(base, "2"))
        wait_until(lambda: _states(server, "m").get(1, (None,))[0] == State.AVAILABLE
                   and _states(server, "m").get(2, (None,))[0] == State.END,
                   what="version 1 back")
        assert _grpc_predict(server, "m") [0] == 1
    finally:
        assert server.stop() == 0, server.log()


CONFIG = """
model_config_list {
  config {
    name: "alpha"
    base_path: "%(alpha)s"
    model_platform: "tensorflow"
    model_version_policy { all {} }
    version_labels { key: "stable" value: 1 }
    version_labels { key: "canary" value: 2 }
  }
  config {
    name: "beta"
    base_path: "%(beta)s"
    model_platform: "tensorflow"
    model_version_policy { specific { versions: 1 } }
  }
}
"""


@pytest.fixture(scope="module")
def config_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("config")
    paths = {name: str(root / "models" / name) for name in ("alpha", "beta", "gamma")}
    for name, scale in (("alpha", 2.0), ("beta", 5.0), ("gamma", 7.0)):
        _drop_version(paths[name], 1, scale)
    _drop_version(paths["alpha"], 2, 3.0)
    _drop_version(paths["beta"], 2, 6.0)
    config_file = root / "models.config"
    config_file.write_text(CONFIG % paths)
    server = ServerProcess(root / "server", f"--model_config_file={config_file}",
                           "--model_config_file_poll_wait_seconds=1").start()
    server.paths = paths
    server.config_file = config_file
    yield server
    assert server.stop() == 0, server.log()


def test_policies_and_labels(config_server):
    server = config_server
    assert _states(server, "alpha") == {2: (State.AVAILABLE, ""), 1: (State.AVAILABLE, "")}
    assert _states(server, "beta") == {1: (State.AVAILABLE, "")}
    assert _grpc_predict(server, "alpha")[0] == 2
    assert _grpc_predict(server, "alpha", version=1)[0] == 1
    assert _grpc_predict(server, "alpha", label="stable")[0] == 1
    assert _grpc_predict(server, "alpha", label="canary")[0] == 2
    status, body = server.http("POST", "/v1/models/alpha/labels/stable:predict",
                               {"instances": X.tolist()})
    assert status == 200
    np.testing.assert_allclose(body["predictions"], expected_affine(X, scale=2.0))
    status, body = server.http("GET", "/v1/models/alpha/labels/canary")
    assert status == 200 and body["model_version_status"][0]["version"] == "2"
    status, body = server.http("GET", "/v1/models/alpha/labels/nope")
    assert status == 400 and "Unrecognized servable version label: nope" in body["error"]
    status, body = server.http("POST", "/v1/models/beta/versions/2:predict",
                               {"instances": X.tolist()})
    assert status == 404


def _reload(server, text):
    request = model_management_pb2.ReloadConfigRequest()
    text_format.Parse(text, request.config)
    stub = model_service_pb2_grpc.ModelServiceStub(server.channel)
    return stub.HandleReloadConfigRequest(request, timeout=60)


def test_reload_config_adds_and_removes_models(config_server):
    server = config_server
    paths = server.paths
    new_config = f"""model_config_list {{
      config {{ name: "beta" base_path: "{paths['beta']}" model_platform: "tensorflow" }}
      config {{ name: "gamma" base_path: "{paths['gamma']}" model_platform: "tensorflow" }}
    }}"""
    # The config file does not change here, so its poller leaves the reloaded set alone.
    _reload(server, new_config)
    assert _states(server, "gamma") == {1: (State.AVAILABLE, "")}
    # beta's policy became `latest 1`: version 2 replaces version 1.
    assert _states(server, "beta") == {2: (State.AVAILABLE, ""), 1: (State.END, "")}
    assert {v: s for v, (s, _) in _states(server, "alpha").items()} == {
        2: State.END, 1: State.END}
    status, body = server.http("POST", "/v1/models/alpha:predict", {"instances": X.tolist()})
    assert status == 404
    np.testing.assert_array_equal(_grpc_predict(server, "gamma")[1],
                                  expected_affine(X, scale=7.0))

    # A label on a version that is not loaded is refused; the models stay as they are.
    with pytest.raises(grpc.RpcError) as caught:
        _reload(server, new_config.replace(
            'model_platform: "tensorflow" }\n      config { name: "gamma"',
            'model_platform: "tensorflow" version_labels { key: "old" value: 1 } }\n'
            '      config { name: "gamma"'))
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "not currently available" in caught.value.details()
    with pytest.raises(grpc.RpcError) as caught:
        _reload(server, 'model_config_list { config { name: "x" } }')
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "has no base_path" in caught.value.details()
    assert _grpc_predict(server, "gamma")[0] == 1


def test_config_file_poll_replaces_model_set(config_server):
    server = config_server
    text = f"""model_config_list {{
      config {{ name: "alpha" base_path: "{server.paths['alpha']}" model_platform: "tensorflow" }}
    }}"""
    server.config_file.write_text(text)
    wait_until(lambda: _states(server, "alpha").get(2, (None,))[0] == State.AVAILABLE
               and _states(server, "gamma").get(1, (None,))[0] == State.END,
               what="config file re-read")
    assert _grpc_predict(server, "alpha")[0] == 2
