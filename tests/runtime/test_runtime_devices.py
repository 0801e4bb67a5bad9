"""DeviceManager: device set from TF_POPEF_DEVICES, device choice, IPU version and memory checks,
and the counted/timed reloads when runners of different executables share one device."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tf_popef_op
from popef_builders import add_model, weight_model
from tf_popef_op import runtime

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(tf_popef_op.__file__)))
MEMORY = 1472 * 624 * 1024


def unique_weights(seed):
    """A weight model with a hash no other test uses."""
    return weight_model(np.random.default_rng(seed).uniform(-1, 1, (4, 2)).astype(np.float32))


def device(device_id):
    return runtime.DeviceManager().devices()[device_id]


def test_default_devices():
    dm = runtime.DeviceManager()
    devices = dm.devices()
    assert dm.device_count == 8 == len(devices)
    assert [d["id"] for d in devices] == list(range(8))
    assert [d["ipu_version"] for d in devices] == ["ipu2"] * 4 + ["ipu21"] * 4
    assert all(d["memory_bytes"] == MEMORY == runtime.DEVICE_MEMORY_BYTES for d in devices)
    assert set(devices[0]) == {"id", "ipu_version", "memory_bytes", "loaded_executable", "runners", "load_count",
                               "reload_count", "total_load_ns", "last_load_ns"}


def test_ipu_version_mismatch_with_explicit_device():
    with pytest.raises(runtime.FailedPreconditionError) as info:
        runtime.ModelRunner(add_model(ipu_version="ipu21"), runtime.RuntimeConfig(device_id=0))
    assert str(info.value) == "executable built for ipu21 cannot run on device 0 (ipu2)"


def test_ipu21_executable_gets_an_ipu21_device():
    with runtime.ModelRunner(add_model(ipu_version="ipu21")) as runner:
        assert runner.ipu_version == "ipu21"
        assert device(runner.device_id)["ipu_version"] == "ipu21"


def test_no_compatible_device():
    with pytest.raises(runtime.FailedPreconditionError) as info:
        runtime.ModelRunner(add_model(ipu_version="ipu3"))
    assert str(info.value) == (
        "<memory>: no device can run an executable built for ipu3 (devices: 0: ipu2, 1: ipu2, 2: ipu2, 3: ipu2, "
        "4: ipu21, 5: ipu21, 6: ipu21, 7: ipu21; set TF_POPEF_DEVICES to change them)")


def test_device_id_out_of_range():
    with pytest.raises(runtime.InvalidArgumentError, match=r"device_id 99 does not exist \(devices: 0: ipu2"):
        runtime.ModelRunner(add_model(), runtime.RuntimeConfig(device_id=99))


def test_device_memory_too_small():
    model = weight_model(np.ones((4, 2), np.float32), arena_bytes=2_000_000_000)
    with pytest.raises(runtime.FailedPreconditionError) as info:
        runtime.ModelRunner(model)
    assert str(info.value).startswith("<memory>: the executable needs 2000000064 bytes of device memory "
                                      "(weights 64 + arena 2000000000) but device ")
    assert str(info.value).endswith(f"has {MEMORY} bytes")


def test_failed_runner_releases_its_device():
    before = [d["runners"] for d in runtime.DeviceManager().devices()]
    model = add_model()
    model.executable["programs"]["main"][0]["op"] = "NoSuchOp"
    with pytest.raises(runtime.UnimplementedError):
        runtime.ModelRunner(model, runtime.RuntimeConfig(device_id=1))
    assert [d["runners"] for d in runtime.DeviceManager().devices()] == before


def test_auto_choice_prefers_the_device_holding_the_executable_then_idle_ones():
    a = runtime.ModelRunner(unique_weights(101))
    try:
        assert device(a.device_id)["runners"] == 1
        assert device(a.device_id)["loaded_executable"] == a.executable_hash
        b = runtime.ModelRunner(unique_weights(101))  # same content: same device, no reload
        c = runtime.ModelRunner(unique_weights(102))  # other content: an idle device
        try:
            assert b.device_id == a.device_id
            assert c.device_id != a.device_id
            assert device(a.device_id)["runners"] == 2
        finally:
            b.close()
            c.close()
    finally:
        a.close()
    assert device(a.device_id)["runners"] == 0


def test_reloads_when_two_executables_alternate_on_one_device():
    w1 = np.full((4, 2), 1, np.float32)
    w2 = np.full((4, 2), 100, np.float32)
    cfg = runtime.RuntimeConfig(device_id=3)
    a = runtime.ModelRunner(weight_model(w1), cfg)
    b = runtime.ModelRunner(weight_model(w2), cfg)
    try:
        assert a.device_id == b.device_id == 3
        start = device(3)
        x = np.arange(8, dtype=np.float32).reshape(4, 2)
        for _ in range(3):
            # Each switch reloads the weights: results must use the right ones.
            np.testing.assert_array_equal(a.execute({"X": x})["O"], (x + w1) * x)
            np.testing.assert_array_equal(b.execute({"X": x})["O"], (x + w2) * x)
        end = device(3)
        assert end["reload_count"] - start["reload_count"] == 6
        assert end["load_count"] - start["load_count"] == 6
        assert end["total_load_ns"] > start["total_load_ns"]
        assert end["last_load_ns"] >= 0
        assert end["loaded_executable"] == b.executable_hash
        assert a.stats()["reload_count"] == end["reload_count"]
    finally:
        a.close()
        b.close()


def test_same_executable_shares_a_device_without_reloads():
    cfg = runtime.RuntimeConfig(device_id=2)
    model = unique_weights(7)
    a = runtime.ModelRunner(model, cfg)
    b = runtime.ModelRunner(model.to_bytes(), cfg)
    try:
        start = device(2)
        x = np.ones((4, 2), np.float32)
        for _ in range(3):
            a.execute({"X": x})
            b.execute({"X": x})
        assert device(2)["reload_count"] == start["reload_count"]
        assert device(2)["load_count"] == start["load_count"]
    finally:
        a.close()
        b.close()


def _devices_in_subprocess(value):
    code = ("import json\nfrom tf_popef_op import runtime\n"
            "try:\n"
            "    print(json.dumps([[d['id'], d['ipu_version']] for d in runtime.DeviceManager().devices()]))\n"
            "except runtime.Error as e:\n"
            "    print(json.dumps({'type': type(e).__name__, 'message': str(e)}))\n")
    env = dict(os.environ, TF_POPEF_DEVICES=value,
               PYTHONPATH=os.pathsep.join([REPO_ROOT, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_tf_popef_devices_env():
    assert _devices_in_subprocess("ipu21:2, ipu2") == [[0, "ipu21"], [1, "ipu21"], [2, "ipu2"]]


@pytest.mark.parametrize("value,reason", [
    ("ipu3:2", "unknown IPU version 'ipu3'"),
    ("ipu2:0", "device count 0 in 'ipu2:0' must be 1..64"),
    ("ipu2:x", "bad device count 'x' in 'ipu2:x'"),
    ("ipu2:1,,ipu21:1", "empty entry"),
    ("", "empty entry"),
])
def test_bad_tf_popef_devices_env(value, reason):
    result = _devices_in_subprocess(value)
    assert result["type"] == "InvalidArgumentError"
    assert result["message"].startswith(f'TF_POPEF_DEVICES="{value}": {reason}')
    assert "e.g. \"ipu2:4,ipu21:4\"" in result["message"]
