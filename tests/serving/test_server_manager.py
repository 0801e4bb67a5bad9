"""ServableManager in-process with a fake loader: every state a version passes through, and
availability preserved while a replacement loads or fails."""
import threading

import pytest
from tensorflow_serving.apis import get_model_status_pb2

from serving.model_server.errors import ServingError
from serving.model_server.manager import ServableManager
from serving.model_server.model_config import parse_config_text
from serving_harness import wait_until

State = get_model_status_pb2.ModelVersionStatus.State


class FakeServable:
    def __init__(self, name, version):
        self.name, self.version, self.unloaded = name, version, False

    def unload(self):
        self.unloaded = True


def _version_dir(base, version):
    path = base / str(version)
    path.mkdir(parents=True)
    (path / "saved_model.pb").write_bytes(b"")


def _config(base, policy=""):
    return parse_config_text(f'model_config_list {{ config {{ name: "m" base_path: "{base}" '
                             f'{policy} }} }}')


def _spec(version=None):
    from tensorflow_serving.apis import model_pb2
    spec = model_pb2.ModelSpec(name="m")
    if version is not None:
        spec.version.value = version
    return spec


def test_every_state_and_load_before_unload(tmp_path):
    gate = threading.Event()
    events = []

    def load(name, version, path):
        if version == 2:
            gate.wait(30)
        return FakeServable(name, version)

    manager = ServableManager(load, on_event=lambda kind, n, v: events.append((kind, v)))
    _version_dir(tmp_path, 1)
    manager.reload_config(_config(tmp_path))
    assert manager.status("m") == [(1, State.AVAILABLE, None)]
    first = manager.resolve(_spec())

    _version_dir(tmp_path, 2)
    worker = threading.Thread(target=manager.reconcile)
    worker.start()
    wait_until(lambda: (2, State.LOADING, None) in manager.status("m"),
               what="version 2 LOADING")
    # While version 2 loads, version 1 keeps answering.
    assert manager.resolve(_spec()) is first
    gate.set()
    worker.join(30)
    assert [(v, s) for v, s, _ in manager.status("m")] == [(2, State.AVAILABLE), (1, State.END)]
    assert first.unloaded
    assert events == [("loading", 1), ("available", 1), ("loading", 2), ("available", 2),
                      ("unloading", 1), ("unloaded", 1)]


def test_failed_replacement_keeps_the_old_version(tmp_path):
    def load(name, version, path):
        if version == 2:
            raise ValueError("bad model")
        return FakeServable(name, version)

    manager = ServableManager(load)
    _version_dir(tmp_path, 1)
    manager.reload_config(_config(tmp_path))
    _version_dir(tmp_path, 2)
    manager.reconcile()
    rows = {v: (s, e) for v, s, e in manager.status("m")}
    assert rows[1][0] == State.AVAILABLE
    assert rows[2][0] == State.END and "bad model" in rows[2][1].message
    assert manager.resolve(_spec()).version == 1
    manager.reconcile()  # a failed, unchanged version is not retried on every poll
    assert manager.status("m", version=2)[0][1] == State.END


def test_latest_two_and_specific(tmp_path):
    manager = ServableManager(lambda n, v, p: FakeServable(n, v))
    for version in (1, 2, 3):
        _version_dir(tmp_path, version)
    manager.reload_config(_config(tmp_path, "model_version_policy { latest { num_versions: 2 } }"))
    assert [(v, s) for v, s, _ in manager.status("m")] == [(3, State.AVAILABLE),
                                                           (2, State.AVAILABLE)]
    manager.reload_config(_config(tmp_path, "model_version_policy { specific { versions: 1 } }"))
    assert [(v, s) for v, s, _ in manager.status("m")] == [
        (3, State.END), (2, State.END), (1, State.AVAILABLE)]
    with pytest.raises(ServingError) as caught:
        manager.resolve(_spec(3))
    assert caught.value.code.name == "NOT_FOUND"


def test_labels_for_unavailable_versions_need_the_flag(tmp_path):
    _version_dir(tmp_path, 1)
    labelled = _config(tmp_path, 'version_labels { key: "next" value: 5 }')
    with pytest.raises(ServingError) as caught:
        ServableManager(lambda n, v, p: FakeServable(n, v)).reload_config(labelled)
    assert caught.value.code.name == "FAILED_PRECONDITION"
    permissive = ServableManager(lambda n, v, p: FakeServable(n, v),
                                 allow_labels_for_unavailable=True)
    permissive.reload_config(labelled)
    from tensorflow_serving.apis import model_pb2
    with pytest.raises(ServingError) as caught:
        permissive.resolve(model_pb2.ModelSpec(name="m", version_label="next"))
    assert caught.value.code.name == "NOT_FOUND"


def _failing(*bad_versions):
    """A loader failing the given versions."""
    def load(name, version, path):
        if version in bad_versions:
            raise ValueError(f"version {version} is broken")
        return FakeServable(name, version)
    return load


def _available(manager):
    return sorted(v for v, s, _ in manager.status("m") if s == State.AVAILABLE)


def test_failing_newer_versions_under_latest_two(tmp_path):
    """Like TF Serving's AvailabilityPreservingPolicy: an unaspired version unloads once an
    aspired one serves, and the newest serving version stays while no aspired one can."""
    manager = ServableManager(_failing(3, 4))
    for version in (1, 2):
        _version_dir(tmp_path, version)
    manager.reload_config(_config(tmp_path, "model_version_policy { latest { num_versions: 2 } }"))
    assert _available(manager) == [1, 2]
    _version_dir(tmp_path, 3)   # aspired {2, 3}: 3 fails, 2 serves, 1 is no longer aspired
    manager.reconcile()
    assert _available(manager) == [2]
    assert manager.resolve(_spec()).version == 2
    _version_dir(tmp_path, 4)   # aspired {3, 4}: both fail, 2 keeps serving
    manager.reconcile()
    assert _available(manager) == [2]
    assert manager.resolve(_spec()).version == 2
    rows = {v: (s, e) for v, s, e in manager.status("m")}
    assert rows[4][0] == State.END and "version 4 is broken" in rows[4][1].message


def test_failed_version_is_retried_when_its_files_change(tmp_path):
    """A version seen before its copy completed fails once, is not retried while unchanged,
    and loads when more files arrive."""
    calls = {}

    def load(name, version, path):
        calls[version] = calls.get(version, 0) + 1
        if not (tmp_path / str(version) / "variables").exists():
            raise ValueError("variables missing")
        return FakeServable(name, version)

    manager = ServableManager(load)
    _version_dir(tmp_path, 1)
    (tmp_path / "1" / "variables").mkdir()
    (tmp_path / "1" / "variables" / "v").write_bytes(b"1")
    manager.reload_config(_config(tmp_path))
    _version_dir(tmp_path, 2)
    manager.reconcile()
    manager.reconcile()
    assert calls[2] == 1 and _available(manager) == [1]
    (tmp_path / "2" / "variables").mkdir()
    (tmp_path / "2" / "variables" / "v").write_bytes(b"2")
    manager.reconcile()
    assert calls[2] == 2 and _available(manager) == [2]
