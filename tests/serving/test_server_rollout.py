"""Safe rollouts against a running server under a steady request stream (gRPC with the
official tensorflow-serving-api stubs, and REST): versions whose PopEF is truncated or
missing, or whose warm-up fails, never serve and GetModelStatus reports why, while the
serving version answers every request; a good version then replaces it, and a version whose
files appear before they are complete loads once the copy completes. Versions are copied in
as operators do: written to a temporary directory, then renamed into the base path."""
import os
import shutil
import sys
import threading
import time

import grpc
import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import (get_model_status_pb2, model_service_pb2_grpc, predict_pb2,
                                     prediction_service_pb2_grpc)

from serving_harness import REPO, ServerProcess, wait_until

sys.path.insert(0, os.path.join(REPO, "tests", "op"))
from popef_models import compile_add_model  # noqa: E402

State = get_model_status_pb2.ModelVersionStatus.State
X = np.array([[1.0, 2.0]], np.float32)
Y = np.array([[10.0, 20.0]], np.float32)
ASSET = os.path.join("assets", "add.popef")
REQUESTS_PER_CHECK = 20   # requests both clients must answer after each step
CODES = {code.value[0]: code for code in grpc.StatusCode}


class Rollout:
    """A server on base path `base` serving version 1, and a good export to copy from."""

    def __init__(self, root):
        from serving.export import export_saved_model
        popef = compile_add_model(str(root / "popef"), batch=4)
        self.good = str(root / "good")
        export_saved_model(popef, self.good)
        self.root = str(root)
        self.base = str(root / "models" / "add")
        os.makedirs(self.base)
        self.copy_in(1)
        self.server = ServerProcess(root / "server", "--model_name=add",
                                    f"--model_base_path={self.base}",
                                    "--file_system_poll_wait_seconds=1").start()

    def copy_in(self, version, damage=None):
        """Writes the version next to the base path, damages it, renames it in."""
        staging = os.path.join(self.root, f".staging-{version}")
        shutil.copytree(self.good, staging)
        if damage is not None:
            damage(staging)
        os.rename(staging, os.path.join(self.base, str(version)))

    def settled(self, version):
        """The version's (state, code, message) once its load finished, else None."""
        row = self.status().get(version)
        return row if row is not None and row[0] in (State.AVAILABLE, State.END) else None

    def status(self):
        request = get_model_status_pb2.GetModelStatusRequest()
        request.model_spec.name = "add"
        stub = model_service_pb2_grpc.ModelServiceStub(self.server.channel)
        response = stub.GetModelStatus(request, timeout=30)
        return {s.version: (s.state, CODES[s.status.error_code], s.status.error_message)
                for s in response.model_version_status}


class Traffic:
    """One gRPC and one REST client sending Predict in a loop; every answer is recorded."""

    def __init__(self, server):
        self.server = server
        self.lock = threading.Lock()
        self.answers = {"grpc": [], "rest": []}   # served version per request
        self.failures = []
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._loop, args=(p,)) for p in self.answers]

    def _grpc(self):
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "add"
        request.inputs["X"].CopyFrom(tf.make_tensor_proto(X))
        request.inputs["Y"].CopyFrom(tf.make_tensor_proto(Y))
        stub = prediction_service_pb2_grpc.PredictionServiceStub(self.server.channel)
        response = stub.Predict(request, timeout=30)
        np.testing.assert_array_equal(tf.make_ndarray(response.outputs["O"]), X + Y)
        return response.model_spec.version.value

    def _rest(self):
        status, body = self.server.http("POST", "/v1/models/add:predict",
                                        {"inputs": {"X": X.tolist(), "Y": Y.tolist()}})
        assert status == 200, (status, body)
        np.testing.assert_array_equal(body["outputs"], X + Y)
        _, metadata = self.server.http("GET", "/v1/models/add/metadata")
        return int(metadata["model_spec"]["version"])

    def _loop(self, protocol):
        send = self._grpc if protocol == "grpc" else self._rest
        while not self.stop.is_set():
            # Stamped when sent: an answer that arrives after a mark but was sent before it
            # may come from the version the mark was meant to exclude.
            sent = time.monotonic()
            try:
                version = send()
            except Exception as error:  # counted, and asserted to be none
                with self.lock:
                    self.failures.append((sent, protocol, repr(error)))
                continue
            with self.lock:
                self.answers[protocol].append((sent, version))

    def mark(self):
        return time.monotonic()

    def since(self, mark):
        """(versions answered per protocol, failures) for the requests sent after `mark`,
        once both protocols answered REQUESTS_PER_CHECK of them."""
        def after(rows):
            return [row for row in rows if row[0] >= mark]

        def enough():
            with self.lock:
                return all(len(after(a)) >= REQUESTS_PER_CHECK for a in self.answers.values())
        wait_until(enough, what="traffic")
        with self.lock:
            return ({p: {version for _, version in after(a)} for p, a in self.answers.items()},
                    [failure[1:] for failure in after(self.failures)])

    def total(self):
        with self.lock:
            return sum(len(a) for a in self.answers.values()), len(self.failures)

    def __enter__(self):
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for thread in self.threads:
            thread.join(30)


@pytest.fixture(scope="module")
def rollout(tmp_path_factory):
    setup = Rollout(tmp_path_factory.mktemp("rollout"))
    yield setup
    assert setup.server.stop() == 0, setup.server.log()


def _truncate(version_dir):
    path = os.path.join(version_dir, ASSET)
    with open(path, "r+b") as handle:
        handle.truncate(os.path.getsize(path) // 2)


def _remove_popef(version_dir):
    os.remove(os.path.join(version_dir, ASSET))


def _bad_warmup(version_dir):
    from serving.model_server.warmup import write_warmup_file
    request = predict_pb2.PredictRequest()
    request.inputs["X"].CopyFrom(tf.make_tensor_proto(np.zeros([1, 3], np.float32)))
    request.inputs["Y"].CopyFrom(tf.make_tensor_proto(np.zeros([1, 3], np.float32)))
    write_warmup_file(version_dir, [request])


# (version, damage, GetModelStatus code, words of its message): the PopEF failures come from
# opening it at load, before any warm-up request runs.
BROKEN = [
    (2, _truncate, grpc.StatusCode.DATA_LOSS, "assets/add.popef: truncated"),
    (3, _remove_popef, grpc.StatusCode.NOT_FOUND, "assets/add.popef: asset 'add.popef' listed"),
    (4, _bad_warmup, grpc.StatusCode.INVALID_ARGUMENT, "warm-up record 0"),
]


def test_broken_versions_stay_out_and_a_good_one_replaces_the_old(rollout):
    failed_per_case = {}
    with Traffic(rollout.server) as traffic:
        assert traffic.since(traffic.mark()) == ({"grpc": {1}, "rest": {1}}, [])
        for version, damage, code, words in BROKEN:
            mark = traffic.mark()
            rollout.copy_in(version, damage)
            state, got_code, message = wait_until(lambda: rollout.settled(version),
                                                  what=f"version {version} tried")
            assert (state, got_code) == (State.END, code), message
            assert words in message
            assert rollout.status()[1][:2] == (State.AVAILABLE, grpc.StatusCode.OK)
            served, failures = traffic.since(mark)
            failed_per_case[damage.__name__] = len(failures)
            assert (served, failures) == ({"grpc": {1}, "rest": {1}}, [])
        status, body = rollout.server.http("GET", "/v1/models/add/versions/2")
        assert status == 200 and body["model_version_status"][0]["status"]["error_code"] == (
            "DATA_LOSS")

        mark = traffic.mark()
        rollout.copy_in(5)
        wait_until(lambda: rollout.status()[1][0] == State.END, what="version 1 replaced")
        assert rollout.status()[5][:2] == (State.AVAILABLE, grpc.StatusCode.OK)
        served, failures = traffic.since(mark)
        failed_per_case["good replacement"] = len(failures)
        assert failures == [] and served["grpc"] <= {1, 5} and served["rest"] <= {1, 5}
        assert traffic.since(traffic.mark()) == ({"grpc": {5}, "rest": {5}}, [])
        answered, failed = traffic.total()
    print(f"failed requests per rollout case: {failed_per_case}; answered {answered}, "
          f"failed {failed} in all")
    log = rollout.server.log()
    assert "Loading servable version {name: add version: 2} failed" in log


def test_version_whose_files_arrive_late_loads_once_complete(rollout):
    """The directory and saved_model.pb appear first (a non-atomic copy): the load fails,
    the serving version stays, and the version loads when the rest of its files arrive."""
    serving = max(v for v, (s, _, _) in rollout.status().items() if s == State.AVAILABLE)
    late = serving + 1
    target = os.path.join(rollout.base, str(late))
    with Traffic(rollout.server) as traffic:
        mark = traffic.mark()
        os.makedirs(target)
        shutil.copy(os.path.join(rollout.good, "saved_model.pb"), target)
        assert wait_until(lambda: rollout.settled(late),
                          what="incomplete version tried")[0] == State.END
        assert rollout.status()[serving][0] == State.AVAILABLE
        for name in os.listdir(rollout.good):
            source = os.path.join(rollout.good, name)
            if os.path.isdir(source):
                shutil.copytree(source, os.path.join(target, name))
            elif name != "saved_model.pb":
                shutil.copy(source, target)
        wait_until(lambda: rollout.status()[late][0] == State.AVAILABLE
                   and rollout.status()[serving][0] == State.END, what="late version loaded")
        served, failures = traffic.since(mark)
        assert failures == [] and served["grpc"] <= {serving, late}
        assert traffic.since(traffic.mark()) == ({"grpc": {late}, "rest": {late}}, [])
    print("failed requests while the late version completed:", len(failures))


def test_file_lost_after_load_answers_500_not_404(rollout):
    """A version without warm-up records loads (its PopEF opens), then loses its PopEF before
    any request ran it: requests answer INTERNAL / HTTP 500, never NOT_FOUND / 404."""
    newest = max(rollout.status())
    version = newest + 1
    rollout.copy_in(version, lambda path: shutil.rmtree(os.path.join(path, "assets.extra")))
    assert wait_until(lambda: rollout.settled(version), what="version loaded")[0] == (
        State.AVAILABLE)
    os.remove(os.path.join(rollout.base, str(version), ASSET))
    with pytest.raises(grpc.RpcError) as caught:
        Traffic(rollout.server)._grpc()
    assert caught.value.code() == grpc.StatusCode.INTERNAL
    assert "add.popef" in caught.value.details()
    status, body = rollout.server.http("POST", "/v1/models/add:predict",
                                       {"inputs": {"X": X.tolist(), "Y": Y.tolist()}})
    assert status == 500 and "a file it needs is missing" in body["error"]
