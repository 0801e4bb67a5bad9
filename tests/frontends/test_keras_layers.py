"""Every standard Keras layer in a tiny model, saved as a .keras file, exported by the
front end and compared with the Keras model's own output:

- test_export_matches_keras: the exported ONNX run by onnxruntime (checks the front end alone);
- test_emulator_matches_keras: compiled and run on the emulator in fp32 (1e-4) and fp16 (2e-2).

Run alone: `.venv/bin/python -m pytest -q tests/frontends/test_keras_layers.py` (~2 minutes).
"""
import numpy as np
import onnxruntime as ort
import pytest

from compiler.converter import Converter
from compiler.frontends import tensorflow_to_onnx
from keras_checks import TOLERANCE, assert_close, run_on_emulator
from keras_layer_zoo import LAYERS, sample_input

BATCH = 2


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """layer id -> (.keras path, input, Keras output, exported ONNX); built on first use."""
    folder = tmp_path_factory.mktemp("keras_layers")
    cache = {}

    def get(name):
        if name not in cache:
            import keras
            build, shape, dtype = LAYERS[name]
            keras.utils.set_random_seed(7)
            model = build()
            path = str(folder / f"{name}.keras")
            model.save(path)
            x = sample_input(shape, dtype, BATCH)
            cache[name] = (path, x, np.asarray(model(x)), tensorflow_to_onnx(path))
        return cache[name]
    return get


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_export_matches_keras(exported, name):
    _, x, want, model = exported(name)
    model.ir_version = min(model.ir_version, 8)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {model.graph.input[0].name: x})[0]
    assert_close(got, want, TOLERANCE["fp32"], f"{name} via onnxruntime")


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", sorted(LAYERS))
def test_emulator_matches_keras(exported, name, precision):
    path, x, want, _ = exported(name)
    converted = Converter(batch_size=BATCH, precision=precision).convert(path)
    result = run_on_emulator(converted, {converted.graph.input[0].name: x}, precision)
    assert_close(next(iter(result.values())).astype(np.float32), want, TOLERANCE[precision], f"{name} ({precision})")
