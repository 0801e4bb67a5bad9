"""A PopEF SavedModel version in-process: loading opens every PopEF asset with the runtime
(a truncated, missing or corrupt PopEF fails the load with the runtime's code, without any
warm-up records), and runtime errors at request time answer codes that are not NOT_FOUND."""
import os
import sys

import grpc
import numpy as np
import pytest
from tensorflow.core.framework import types_pb2

from serving.export import export_saved_model
from serving.export import main as export_main
from serving.model_server.batching import BatchingOptions, BatchScheduler
from serving.model_server.errors import ServingError, http_status
from serving.model_server.flags import parse_flags
from serving.model_server.servable import Servable
from serving.model_server.server import _build_load_servable
from serving.model_server.warmup import warmup_records
from serving_harness import REPO

sys.path.insert(0, os.path.join(REPO, "tests", "op"))
from popef_models import compile_add_model, compile_fused_example  # noqa: E402

X = np.array([[1.0, 2.0]], np.float32)
Y = np.array([[10.0, 20.0]], np.float32)


@pytest.fixture(scope="module", autouse=True)
def op_library():
    import tf_popef_op
    tf_popef_op.load_op_library()


@pytest.fixture(scope="module")
def add_popef(tmp_path_factory):
    return compile_add_model(str(tmp_path_factory.mktemp("add_popef")), batch=4)


def _export(popef, path):
    export_saved_model(popef, str(path), warmup_requests=False)
    return str(path), os.path.join(str(path), "assets", "add.popef")


def _truncate(path):
    with open(path, "r+b") as handle:
        handle.truncate(os.path.getsize(path) // 2)


def _load(path):
    servable = Servable("add", 1, path)
    servable.load()
    return servable


def _garble(path):
    with open(path, "r+b") as handle:
        handle.write(b"NOTPOPEF")


@pytest.mark.parametrize("damage, code, words", [
    (_truncate, grpc.StatusCode.DATA_LOSS, "truncated"),
    (os.remove, grpc.StatusCode.NOT_FOUND, "asset 'add.popef' listed in saved_model.pb is missing"),
    (_garble, grpc.StatusCode.INVALID_ARGUMENT, "not a PopEF file"),
])
def test_load_opens_the_popef(add_popef, tmp_path, damage, code, words):
    path, asset = _export(add_popef, tmp_path / "1")
    damage(asset)
    with pytest.raises(ServingError) as caught:
        _load(path)
    assert caught.value.code == code and words in caught.value.message
    assert asset in caught.value.message


def test_good_version_loads_and_runs(add_popef, tmp_path):
    path, _ = _export(add_popef, tmp_path / "1")
    np.testing.assert_array_equal(_load(path).run("", {"X": X, "Y": Y})["O"], X + Y)


def test_request_time_runtime_errors_are_not_not_found(add_popef, tmp_path):
    """The op opens its PopEF on the first request: files damaged after the load (and before
    any request) answer INTERNAL or DATA_LOSS (HTTP 500), never NOT_FOUND (404)."""
    for damage, code in ((os.remove, grpc.StatusCode.INTERNAL),
                         (_truncate, grpc.StatusCode.DATA_LOSS)):
        path, asset = _export(add_popef, tmp_path / damage.__name__)
        servable = _load(path)
        damage(asset)
        with pytest.raises(ServingError) as caught:
            servable.run("", {"X": X, "Y": Y})
        assert caught.value.code == code and http_status(code) == 500
        assert "add.popef" in caught.value.message


def test_export_writes_a_warmup_request_per_signature(tmp_path):
    """Fused export: one record per signature (batch 1 where batched, declared shapes and
    dtypes otherwise), replayed at load, also with the batcher on (whose `adder` output has no
    batch axis: that signature cannot be batched, which fails its requests, not the load)."""
    popef = compile_fused_example(str(tmp_path / "fused"), names=["adder", "concat"])
    path = str(tmp_path / "models" / "fused" / "1")
    export_saved_model(popef, path)
    requests = {r.predict_log.request.model_spec.signature_name: r.predict_log.request
                for r in warmup_records(path)}
    shapes = {name: {k: ([d.size for d in v.tensor_shape.dim], types_pb2.DataType.Name(v.dtype))
                     for k, v in request.inputs.items()} for name, request in requests.items()}
    assert shapes == {"serving_default": {"X": ([1, 2], "DT_FLOAT"), "Y": ([1, 2], "DT_FLOAT")},
                      "adder": {"X": ([1, 2], "DT_FLOAT"), "Y": ([1, 2], "DT_FLOAT")},
                      "concat": {"X": ([1, 1], "DT_HALF")}}
    scheduler = BatchScheduler(BatchingOptions())
    try:
        options = parse_flags(["--enable_batching", "--model_name=fused",
                               f"--model_base_path={tmp_path / 'models' / 'fused'}"])
        servable = _build_load_servable(options, None, scheduler)("fused", 1, path)
        out = servable.run("concat", {"X": np.ones([1, 1], np.float16)})["O"]
        np.testing.assert_array_equal(out, [[1.0, 1.5, 2.0]])
    finally:
        scheduler.stop()

    bare = str(tmp_path / "bare")
    assert export_main([popef, bare, "--no_warmup_requests"]) == 0
    assert warmup_records(bare) == []
