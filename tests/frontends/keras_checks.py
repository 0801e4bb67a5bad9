"""Shared by the TensorFlow front-end and model tests: run a compiled model on the emulator and
compare with a reference, with the model tolerances (fp32 1e-4, fp16 2e-2, relative to
the largest magnitude of the reference so a tensor of small values is not judged on noise)."""
from typing import Dict, Optional, Sequence

import numpy as np
from compiler import Compiler
from tf_popef_op.runtime import ModelRunner, RuntimeConfig

TOLERANCE = {"fp32": 1e-4, "fp16": 2e-2}


def assert_close(got: np.ndarray, want: np.ndarray, rel: float, what: str = "output") -> None:
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-6)
    err = float(np.max(np.abs(got - want))) if want.size else 0.0
    assert err <= rel * scale, f"{what}: max abs error {err:.3g} > {rel:g} x max |reference| {scale:.3g}"


def run_on_emulator(model, feeds: Dict[str, np.ndarray], precision: str = "fp32",
                    outputs: Optional[Sequence[str]] = None) -> Dict[str, np.ndarray]:
    executable = Compiler.compile(model)
    runner = ModelRunner(executable, RuntimeConfig())
    if precision == "fp16":
        feeds = {k: (v.astype(np.float16) if v.dtype == np.float32 else v) for k, v in feeds.items()}
    result = runner.execute(feeds)
    return {k: np.asarray(v) for k, v in result.items()}
