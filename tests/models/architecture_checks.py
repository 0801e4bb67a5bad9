"""Exports an architecture once and compares the emulator with TensorFlow, shared by
test_keras_architectures.py and benchmarks/bench_keras_architectures.py.

Error measures (relative to the reference's own size, so tiny entries are not judged on noise):
- fp32: max |emulator - TF| / max |TF| <= 1e-4 on every output;
- fp16: ||emulator - TF||_2 / ||TF||_2 <= 2e-2, except where onnxruntime running the same fp16
  model misses that too: random-weight deep CNNs with calibrated BatchNorm amplify rounding
  through their depth (ResNet50 at 64x64: onnxruntime fp16 is 7% off TensorFlow), and there the
  emulator must be within 1.25x of onnxruntime's own error.
"""
import dataclasses
import os
import time
from typing import Dict

import numpy as np

from compiler.converter import Converter
from compiler.frontends import tensorflow_to_onnx
from tf_popef_op.runtime import ModelRunner, RuntimeConfig
from compiler import Compiler

FP32_MAX_REL = 1e-4
FP16_L2_REL = 2e-2
FP16_VS_ORT = 1.25


@dataclasses.dataclass
class ExportedModel:
    name: str
    saved_model: str
    onnx: object                        # the tf2onnx export (opset 17, dynamic batch)
    inputs: np.ndarray                  # the largest batch; smaller batches are its first rows
    reference: Dict[str, np.ndarray]    # TensorFlow's outputs of the SavedModel signature
    tf_seconds_per_batch: float


def export(name: str, model, inputs: np.ndarray, folder: str) -> ExportedModel:
    import tensorflow as tf
    path = os.path.join(folder, name)
    model.export(path, verbose=False)
    signature = tf.saved_model.load(path).signatures["serving_default"]
    input_name = list(signature.structured_input_signature[1])[0]
    start = time.perf_counter()
    reference = {k: v.numpy() for k, v in signature(**{input_name: tf.constant(inputs)}).items()}
    seconds = time.perf_counter() - start
    return ExportedModel(name, path, tensorflow_to_onnx(path), inputs, reference, seconds)


def run(exported: ExportedModel, batch: int, precision: str):
    """(emulator outputs, onnxruntime outputs of the same converted model, seconds per run)."""
    import onnxruntime as ort
    converted = Converter(batch_size=batch, precision=precision).convert(exported.onnx)
    input_name = converted.graph.input[0].name
    x = exported.inputs[:batch]
    if precision == "fp16" and x.dtype == np.float32:
        x = x.astype(np.float16)
    runner = ModelRunner(Compiler.compile(converted), RuntimeConfig())
    start = time.perf_counter()
    emulator = runner.execute({input_name: x})
    seconds = time.perf_counter() - start
    oracle = type(converted)()
    oracle.CopyFrom(converted)
    oracle.ir_version = min(oracle.ir_version, 8)
    sess = ort.InferenceSession(oracle.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in oracle.graph.output]
    ort_out = dict(zip(names, sess.run(None, {input_name: x})))
    return ({k: np.asarray(v, np.float32) for k, v in emulator.items()},
            {k: np.asarray(v, np.float32) for k, v in ort_out.items()}, seconds)


def max_rel(got, want) -> float:
    return float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))


def l2_rel(got, want) -> float:
    return float(np.linalg.norm((got - want).ravel()) / max(float(np.linalg.norm(want.ravel())), 1e-30))


def check(exported: ExportedModel, batch: int, precision: str, emulator, onnxruntime) -> Dict[str, dict]:
    """Asserts the tolerances above; returns the measured errors per output."""
    report = {}
    assert set(emulator) == set(exported.reference), (sorted(emulator), sorted(exported.reference))
    for name, want in exported.reference.items():
        want = want[:batch].astype(np.float32)
        got = emulator[name]
        assert got.shape == want.shape, f"{exported.name}/{name}: shape {got.shape} != {want.shape}"
        assert float(np.std(want)) > 1e-3, f"{exported.name}/{name}: the reference carries no signal"
        errors = {"max_rel": max_rel(got, want), "l2_rel": l2_rel(got, want),
                  "ort_max_rel": max_rel(onnxruntime[name], want), "ort_l2_rel": l2_rel(onnxruntime[name], want)}
        report[name] = errors
        where = f"{exported.name} batch {batch} {precision} output '{name}'"
        if precision == "fp32":
            assert errors["max_rel"] <= FP32_MAX_REL, f"{where}: {errors}"
        else:
            bound = max(FP16_L2_REL, FP16_VS_ORT * errors["ort_l2_rel"])
            assert errors["l2_rel"] <= bound, f"{where}: {errors} (bound {bound:.3g})"
    return report
