"""Model base paths, config files and warm-up files through tf.io.gfile: a PopEF model under
`ram://` (copied to a local directory while it serves, removed at unload) and under `file://`,
served in-process (ram:// is per process) through the gRPC services and the official
tensorflow-serving-api stubs."""
import contextlib
import concurrent.futures
import logging
import os
import sys

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

from serving_harness import REPO
from serving_models import expected_affine, save_affine

sys.path.insert(0, os.path.join(REPO, "tests", "op"))
from popef_models import compile_add_model  # noqa: E402

X = np.array([[1.0, 2.0]], np.float32)
Y = np.array([[10.0, 20.0]], np.float32)


@pytest.fixture(scope="module")
def add_popef(tmp_path_factory):
    import tf_popef_op
    tf_popef_op.load_op_library()
    return compile_add_model(str(tmp_path_factory.mktemp("add_popef")), batch=4)


def _export(popef, path, warmup=True):
    from serving.export import export_saved_model
    export_saved_model(popef, str(path), warmup_requests=warmup)
    return str(path)


def _copy_tree(source, target):
    for directory, _, names in tf.io.gfile.walk(source):
        relative = os.path.relpath(directory, source)
        target_dir = target if relative == "." else f"{target}/{relative}"
        tf.io.gfile.makedirs(target_dir)
        for name in names:
            tf.io.gfile.copy(os.path.join(directory, name), f"{target_dir}/{name}",
                             overwrite=True)


@contextlib.contextmanager
def _serving(*flags):
    """ServerCore and its gRPC services in this process, on a free port."""
    from serving.model_server.core import ServerCore
    from serving.model_server.flags import parse_flags
    from serving.model_server.grpc_handlers import add_services
    from serving.model_server.server import _build_load_servable
    options = parse_flags(["--file_system_poll_wait_seconds=0", *flags])
    core = ServerCore(options, _build_load_servable(options, None, None))
    core.start()
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(4))
    add_services(server, core)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield core, prediction_service_pb2_grpc.PredictionServiceStub(channel)
    finally:
        channel.close()
        server.stop(None).wait(10)
        core.stop()
        core.manager.unload_all()


def _predict(stub, name):
    request = predict_pb2.PredictRequest()
    request.model_spec.name = name
    request.inputs["X"].CopyFrom(tf.make_tensor_proto(X))
    request.inputs["Y"].CopyFrom(tf.make_tensor_proto(Y))
    response = stub.Predict(request, timeout=60)
    return response.model_spec.version.value, tf.make_ndarray(response.outputs["O"])


def test_ram_base_path_serves_a_popef_model_from_a_local_copy(add_popef, tmp_path, caplog):
    local = _export(add_popef, tmp_path / "export")
    _copy_tree(local, "ram://ram_base/add/3")
    caplog.set_level(logging.INFO, logger="popef_model_server")
    with _serving("--model_name=add", "--model_base_path=ram://ram_base/add") as (core, stub):
        version, out = _predict(stub, "add")
        assert version == 3
        np.testing.assert_array_equal(out, X + Y)
        (servable,) = core.manager.available_servables()
        copy = servable._local
        assert copy.copied and os.path.isfile(os.path.join(copy.path, "assets", "add.popef"))
        assert "Number of warmup records read: 1." in caplog.text
    assert not os.path.exists(copy.path), "the local copy outlived the unload"


def test_config_file_on_ram_with_file_uri_and_ram_models(add_popef, tmp_path):
    """A PopEF model under file:// loads in place; a plain TF model under ram:// loads
    straight from it (only PopEF versions need local files)."""
    _export(add_popef, tmp_path / "models" / "add" / "1")
    save_affine("ram://ram_models/affine/2", scale=3.0)
    config = "ram://configs/models.config"
    with tf.io.gfile.GFile(config, "w") as handle:
        handle.write(f"""model_config_list {{
          config {{ name: "add" base_path: "file://{tmp_path / 'models' / 'add'}" }}
          config {{ name: "affine" base_path: "ram://ram_models/affine" }}
        }}""")
    with _serving(f"--model_config_file={config}") as (core, stub):
        version, out = _predict(stub, "add")
        assert version == 1
        np.testing.assert_array_equal(out, X + Y)
        add, affine = sorted(core.manager.available_servables(), key=lambda s: s.name)
        assert not add._local.copied and add._local.path == str(tmp_path / "models" / "add" / "1")
        assert affine._local is None
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "affine"
        request.inputs["x"].CopyFrom(tf.make_tensor_proto(X))
        response = stub.Predict(request, timeout=60)
        assert response.model_spec.version.value == 2
        np.testing.assert_array_equal(tf.make_ndarray(response.outputs["y"]),
                                      expected_affine(X, scale=3.0))


def test_unreadable_config_file_names_it(tmp_path):
    from serving.model_server.errors import ServingError
    from serving.model_server.model_config import read_config_file
    with pytest.raises(ServingError) as caught:
        read_config_file("ram://configs/missing.config")
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "ram://configs/missing.config: cannot read the model config file" in (
        caught.value.message)
