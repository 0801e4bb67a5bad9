"""Shared helpers for end-to-end tests: compile with the compiler, run on the emulator runtime,
compare with onnxruntime (the oracle)."""
import copy
import os
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort

from compiler import Compiler
from compiler.converter import Converter
from tf_popef_op.runtime import ModelRunner, RuntimeConfig


def run_onnxruntime(model: onnx.ModelProto, inputs: dict) -> dict:
    oracle = copy.deepcopy(model)
    oracle.ir_version = min(oracle.ir_version, 8)  # onnxruntime 1.31 reads IR <= 13
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(oracle.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, inputs)))


def compile_and_run(model: onnx.ModelProto, inputs: dict, precision: str = "fp32", config=None) -> dict:
    converted = Converter(precision=precision).convert(model)
    executable = Compiler.compile(converted.SerializeToString(), [o.name for o in converted.graph.output])
    runner = ModelRunner(executable, config or RuntimeConfig())
    feed = {}
    for desc in runner.get_execute_inputs():
        feed[desc.name] = inputs[desc.name].astype(desc.numpy_data_type())
    return runner.execute(feed)


def run_with_profile(model: onnx.ModelProto, x: np.ndarray, precision: str = "fp32", options=None):
    """Y of a model with input X and output Y, compiled at `precision` (x cast to it), as float32,
    and the op of every step that ran, in order (to check which kernels a case reached)."""
    converted = Converter(precision=precision).convert(model)
    runner = ModelRunner(Compiler.compile(converted, options=options), RuntimeConfig(profile=True))
    got = runner.execute({"X": x.astype(np.float16) if precision == "fp16" else x})["Y"].astype(np.float32)
    return got, [row["op"] for row in runner.profile()]

def conv_attributes_and_output(x_shape, window, out_channels: int, attrs: dict):
    """Conv attributes with explicit pads/strides/dilations (defaults filled in) and the output
    shape [N, out_channels, spatial...] they give for input `x_shape` and kernel `window`."""
    spatial = len(window)
    attrs = dict(attrs)
    attrs.setdefault("pads", [0] * 2 * spatial)
    attrs.setdefault("strides", [1] * spatial)
    attrs.setdefault("dilations", [1] * spatial)
    out = [x_shape[0], out_channels]
    for d in range(spatial):
        span = attrs["dilations"][d] * (window[d] - 1) + 1
        out.append((x_shape[2 + d] + attrs["pads"][d] + attrs["pads"][spatial + d] - span) // attrs["strides"][d] + 1)
    return attrs, out


def run_in_new_process(script: str, **env: str) -> str:
    """Runs `script` with `python -c` in a new process whose environment adds `env` (the runtime
    reads TF_POPEF_SIMD and TF_POPEF_NUM_THREADS once per process) and can import the integration
    tests' modules; asserts that it exits 0 and returns its stdout."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    full_env = dict(os.environ, **env)
    full_env["PYTHONPATH"] = os.pathsep.join([here, root, full_env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", script], env=full_env, cwd=root, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def check_every_case_in_new_process(module: str, n_cases: int, **env: str) -> None:
    """Runs `module.check_case(name, precision)` for each of its CASES in fp32 and fp16 in a new
    process with `env` (e.g. TF_POPEF_SIMD="portable": the other build of the tiles)."""
    script = (f"import {module} as t\n"
              "for name in t.CASES:\n"
              "    for precision in ('fp32', 'fp16'):\n"
              "        t.check_case(name, precision)\n"
              "print('checked', 2 * len(t.CASES))\n")
    assert f"checked {2 * n_cases}" in run_in_new_process(script, **env)


def assert_matches_fp32_reference(got, want, precision: str, what: str, atol: float = 1e-4) -> None:
    """fp32: elementwise within 1e-4 (rtol) / atol; fp16 (weights and activations rounded once per
    step) against the float32 reference: relative L2 error below 1e-2."""
    if precision == "fp32":
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=atol, err_msg=f"{what} fp32")
    else:
        rel = np.linalg.norm(got - want) / np.linalg.norm(want)
        assert rel < 1e-2, f"{what} fp16: relative L2 error {rel:.2e}"
