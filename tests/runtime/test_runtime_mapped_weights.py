"""Weights used in place from the PopEF (no copy into device memory), the fallbacks that still
copy (TF_POPEF_MMAP_WEIGHTS=0, a weight at a misaligned address), and device-memory pointers
that must be re-taken after another executable reallocated the device's memory."""
import numpy as np
import pytest

from popef_builders import _align, _model, anchor, weight_model
from tf_popef_op import runtime


def expected(x, w):
    return (x + w) * x


def weights(shape=(4, 2), seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


def idle_ipu2_device():
    devices = runtime.DeviceManager().devices()
    idle = [d["id"] for d in devices if d["ipu_version"] == "ipu2" and d["runners"] == 0]
    return idle[-1] if idle else 3


@pytest.mark.parametrize("source", ["file", "bytes"])
def test_weights_are_used_in_place(tmp_path, source):
    w = weights(seed=11)
    model = weight_model(w)
    popef = model.write(tmp_path / "w.popef") if source == "file" else model.to_bytes()
    x = weights(seed=12)
    with runtime.ModelRunner(popef) as runner:
        np.testing.assert_allclose(runner.execute({"X": x})["O"], expected(x, w), rtol=1e-6)
        s = runner.stats()
        assert (s["mapped_weights_bytes"], s["copied_weights_bytes"]) == (w.nbytes, 0)


def test_mapping_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("TF_POPEF_MMAP_WEIGHTS", "0")
    w, x = weights(seed=21), weights(seed=22)
    with runtime.ModelRunner(weight_model(w)) as runner:
        np.testing.assert_allclose(runner.execute({"X": x})["O"], expected(x, w), rtol=1e-6)
        s = runner.stats()
        assert (s["mapped_weights_bytes"], s["copied_weights_bytes"]) == (0, w.nbytes)


def misaligned_weight_model(blob: np.ndarray) -> "object":
    """O = X + W, X/W/O [8] float32, where W is the second half of a 16-float TensorData blob
    loaded at weights offset 32: W's bytes sit 32 bytes into the blob, not 64-byte aligned, so
    the runtime must copy the blob into device memory."""
    anchors = [anchor("X", "float32", [8], "input"), anchor("O", "float32", [8], "output")]
    tensors = [{"id": 0, "name": "X", "dtype": "float32", "shape": [8], "storage": "input", "anchor": "X"},
               {"id": 1, "name": "W", "dtype": "float32", "shape": [8], "storage": "weight", "offset": 64},
               {"id": 2, "name": "O", "dtype": "float32", "shape": [8], "storage": "output", "anchor": "O"}]
    programs = {"load": [{"op": "LoadTensorData", "tensor_data": "blob", "offset": 32, "nbytes": blob.nbytes}],
                "main": [{"op": "Add", "name": "add", "inputs": [0, 1], "outputs": [2], "attrs": {}}]}
    subgraphs = [{"index": 0, "name": "graph0", "program": "main", "batch_size": 8, "batch_axis": 0,
                  "inputs": ["X"], "outputs": ["O"]}]
    return _model(anchors, tensors, programs, subgraphs, ipu_version="ipu2", weights_bytes=_align(32 + blob.nbytes),
                  tensor_data={"blob": blob})


def test_misaligned_weight_is_copied():
    blob = np.arange(16, dtype=np.float32)
    x = np.linspace(0, 1, 8, dtype=np.float32)
    with runtime.ModelRunner(misaligned_weight_model(blob)) as runner:
        np.testing.assert_array_equal(runner.execute({"X": x})["O"], x + blob[8:])
        s = runner.stats()
        assert (s["mapped_weights_bytes"], s["copied_weights_bytes"]) == (0, blob.nbytes)


def test_reload_rebinds_device_memory(monkeypatch):
    """A1 and A2 run the same executable with copied weights; B (larger) makes the device grow
    its memory in between, and A2 then reloads A into the new memory. A1 finds its executable
    loaded but must take its pointers again (they pointed into the freed memory)."""
    monkeypatch.setenv("TF_POPEF_MMAP_WEIGHTS", "0")
    device = idle_ipu2_device()
    cfg = runtime.RuntimeConfig(device_id=device)
    wa, wb = weights((4, 2), seed=31), weights((4096, 2), seed=32)
    xa, xb = weights((4, 2), seed=33), weights((4096, 2), seed=34)
    model_a = weight_model(wa)
    a1 = runtime.ModelRunner(model_a, cfg)
    np.testing.assert_allclose(a1.execute({"X": xa})["O"], expected(xa, wa), rtol=1e-6)
    b = runtime.ModelRunner(weight_model(wb), cfg)
    np.testing.assert_allclose(b.execute({"X": xb})["O"], expected(xb, wb), rtol=1e-6)
    a2 = runtime.ModelRunner(model_a, cfg)
    before = runtime.DeviceManager().devices()[device]["reload_count"]
    for _ in range(3):
        np.testing.assert_allclose(a1.execute({"X": xa})["O"], expected(xa, wa), rtol=1e-6)
        np.testing.assert_allclose(a2.execute({"X": xa})["O"], expected(xa, wa), rtol=1e-6)
        np.testing.assert_allclose(b.execute({"X": xb})["O"], expected(xb, wb), rtol=1e-6)
    assert runtime.DeviceManager().devices()[device]["reload_count"] - before == 5  # B, A, B, A, B
    for r in (a1, a2, b):
        r.close()


def test_mapped_models_alternating_on_one_device():
    """Two mapped executables sharing a device: every switch is still a counted reload, which
    copies nothing; both keep computing with their own weights."""
    device = idle_ipu2_device()
    cfg = runtime.RuntimeConfig(device_id=device)
    w1, w2 = weights((64, 2), seed=41), weights((64, 2), seed=42)
    x = weights((64, 2), seed=43)
    with runtime.ModelRunner(weight_model(w1), cfg) as r1, runtime.ModelRunner(weight_model(w2), cfg) as r2:
        before = runtime.DeviceManager().devices()[device]["reload_count"]
        for _ in range(5):
            np.testing.assert_allclose(r1.execute({"X": x})["O"], expected(x, w1), rtol=1e-6)
            np.testing.assert_allclose(r2.execute({"X": x})["O"], expected(x, w2), rtol=1e-6)
        assert runtime.DeviceManager().devices()[device]["reload_count"] - before >= 9
        assert r1.stats()["copied_weights_bytes"] == 0 and r1.stats()["mapped_weights_bytes"] == w1.nbytes


def test_overlapping_loads_are_copied_in_program_order():
    """Blob B is loaded into the second half of W, then blob A over all of W: the later load wins
    (W = A), so nothing can be used in place and the copies must keep the load program's order
    (copying in address order would leave B in the second half)."""
    a = np.arange(16, dtype=np.float32)
    b = -np.arange(1, 9, dtype=np.float32)
    anchors = [anchor("X", "float32", [16], "input"), anchor("O", "float32", [16], "output")]
    tensors = [{"id": 0, "name": "X", "dtype": "float32", "shape": [16], "storage": "input", "anchor": "X"},
               {"id": 1, "name": "W", "dtype": "float32", "shape": [16], "storage": "weight", "offset": 0},
               {"id": 2, "name": "O", "dtype": "float32", "shape": [16], "storage": "output", "anchor": "O"}]
    programs = {"load": [{"op": "LoadTensorData", "tensor_data": "B", "offset": 32, "nbytes": b.nbytes},
                         {"op": "LoadTensorData", "tensor_data": "A", "offset": 0, "nbytes": a.nbytes}],
                "main": [{"op": "Add", "name": "add", "inputs": [0, 1], "outputs": [2], "attrs": {}}]}
    subgraphs = [{"index": 0, "name": "graph0", "program": "main", "batch_size": 16, "batch_axis": 0,
                  "inputs": ["X"], "outputs": ["O"]}]
    model = _model(anchors, tensors, programs, subgraphs, ipu_version="ipu2", weights_bytes=64,
                   tensor_data={"A": a, "B": b})
    x = np.ones(16, np.float32)
    with runtime.ModelRunner(model) as runner:
        np.testing.assert_array_equal(runner.execute({"X": x})["O"], x + a)
        s = runner.stats()
        assert s["mapped_weights_bytes"] == 0 and s["copied_weights_bytes"] == b.nbytes + a.nbytes
