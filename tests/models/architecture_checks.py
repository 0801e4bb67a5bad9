"""Exports an architecture once and compares the emulator with TensorFlow, shared by
test_keras_architectures.py and benchmarks/bench_keras_architectures.py.

Error measures (relative to the reference's own size, so tiny entries are not judged on noise):
- fp32: max |emulator - TF| / max |TF| <= 1e-4 on every output;
- fp16: ||emulator - TF||_2 / ||TF||_2 <= 2e-2, or within 1.5x of the fp16 weight-rounding
  floor where that floor alone misses 2e-2. The floor is the same converted model with its
  weights (and input) rounded to float16 but every activation in float32, run by onnxruntime:
  no fp16 model can be closer to TensorFlow than its own fp16 weights allow. Random-weight deep
  CNNs with calibrated BatchNorm amplify that rounding through their depth (ResNet50 224: floor
  2.01e-2; at 64x64 about 7%). The emulator also rounds every activation to float16, as fp16
  hardware stores them, which is what the 1.5x leaves room for (measured 1.2x on ResNet50 224,
  1.4-1.5x on the small MobileNetV2 of the tests; onnxruntime's CPU provider lands on or near the
  floor because it runs fp16 Convs in float32).
"""
import dataclasses
import os
import time
from typing import Dict, Optional

import numpy as np

from compiler.converter import Converter
from compiler.frontends import tensorflow_to_onnx
from tf_popef_op.runtime import ModelRunner, RuntimeConfig
from compiler import Compiler

FP32_MAX_REL = 1e-4
FP16_L2_REL = 2e-2
FP16_VS_FLOOR = 1.5


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


@dataclasses.dataclass
class Runs:
    emulator: Dict[str, np.ndarray]
    onnxruntime: Dict[str, np.ndarray]                   # the same converted model
    fp16_floor: Optional[Dict[str, np.ndarray]]          # fp16 only: see the module docstring
    seconds: float                                       # one emulator run


def run(exported: ExportedModel, batch: int, precision: str) -> Runs:
    converted = Converter(batch_size=batch, precision=precision).convert(exported.onnx)
    input_name = converted.graph.input[0].name
    x = exported.inputs[:batch]
    if precision == "fp16" and x.dtype == np.float32:
        x = x.astype(np.float16)
    runner = ModelRunner(Compiler.compile(converted), RuntimeConfig())
    start = time.perf_counter()
    emulator = runner.execute({input_name: x})
    seconds = time.perf_counter() - start
    floor = None
    if precision == "fp16":
        fp32 = Converter(batch_size=batch, precision="fp32").convert(exported.onnx)
        x32 = x.astype(np.float32) if x.dtype == np.float16 else x
        floor = onnxruntime_outputs(with_fp16_rounded_weights(fp32), {input_name: x32})
    return Runs({k: np.asarray(v, np.float32) for k, v in emulator.items()},
                onnxruntime_outputs(converted, {input_name: x}), floor, seconds)


def onnxruntime_outputs(model, feeds) -> Dict[str, np.ndarray]:
    import onnxruntime as ort
    oracle = type(model)()
    oracle.CopyFrom(model)
    oracle.ir_version = min(oracle.ir_version, 8)
    sess = ort.InferenceSession(oracle.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in oracle.graph.output]
    return {k: np.asarray(v, np.float32) for k, v in zip(names, sess.run(None, feeds))}


def with_fp16_rounded_weights(model):
    """A copy whose float32 initializers hold float16-representable values (still float32)."""
    from onnx import TensorProto, numpy_helper
    rounded = type(model)()
    rounded.CopyFrom(model)
    for t in rounded.graph.initializer:
        if t.data_type == TensorProto.FLOAT:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float16).astype(np.float32), t.name))
    return rounded


def max_rel(got, want) -> float:
    return float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-30))


def l2_rel(got, want) -> float:
    return float(np.linalg.norm((got - want).ravel()) / max(float(np.linalg.norm(want.ravel())), 1e-30))


def check(exported: ExportedModel, batch: int, precision: str, runs: Runs) -> Dict[str, dict]:
    """Asserts the tolerances above; returns the measured errors per output."""
    report = {}
    emulator, onnxruntime = runs.emulator, runs.onnxruntime
    assert set(emulator) == set(exported.reference), (sorted(emulator), sorted(exported.reference))
    for name, want in exported.reference.items():
        want = want[:batch].astype(np.float32)
        got = emulator[name]
        assert got.shape == want.shape, f"{exported.name}/{name}: shape {got.shape} != {want.shape}"
        assert float(np.std(want)) > 1e-3, f"{exported.name}/{name}: the reference carries no signal"
        errors = {"max_rel": max_rel(got, want), "l2_rel": l2_rel(got, want),
                  "ort_max_rel": max_rel(onnxruntime[name], want), "ort_l2_rel": l2_rel(onnxruntime[name], want)}
        if runs.fp16_floor is not None:
            errors["floor_l2_rel"] = l2_rel(runs.fp16_floor[name], want)
        report[name] = errors
        where = f"{exported.name} batch {batch} {precision} output '{name}'"
        if precision == "fp32":
            assert errors["max_rel"] <= FP32_MAX_REL, f"{where}: {errors}"
        else:
            bound = max(FP16_L2_REL, FP16_VS_FLOOR * errors["floor_l2_rel"])
            assert errors["l2_rel"] <= bound, f"{where}: {errors} (bound {bound:.3g})"
    return report
