"""Load time and peak resident memory of one model in a fresh process, for bench_models.py:

    python benchmarks/memory_probe.py modelrunner MODEL.popef
    python benchmarks/memory_probe.py onnxruntime MODEL.onnx THREADS

Prints one JSON line: seconds to create the runner/session (`load_s`), to run the first
inference (`first_run_s`) and a later one (`warm_run_s`), and VmHWM (peak resident set) after
the imports (`baseline_hwm_mb`) and at the end (`peak_hwm_mb`); the model's own share is their
difference. Inputs are zeros of the model's input type and shape.
"""
import json
import os
import sys
import time


def vm_hwm_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmHWM in /proc/self/status")


def probe_modelrunner(path: str) -> dict:
    import numpy as np
    from tf_popef_op.runtime import ModelRunner, RuntimeConfig
    baseline = vm_hwm_mb()
    t0 = time.perf_counter()
    runner = ModelRunner(path, RuntimeConfig())
    t1 = time.perf_counter()
    feed = {a.name: np.zeros(a.shape, a.numpy_data_type()) for a in runner.get_execute_inputs()}
    outs = {o.name: np.zeros(o.shape, o.numpy_data_type()) for o in runner.get_execute_outputs()}
    runner.execute(feed, outs)
    t2 = time.perf_counter()
    runner.execute(feed, outs)
    t3 = time.perf_counter()
    return {"load_s": t1 - t0, "first_run_s": t2 - t1, "warm_run_s": t3 - t2, "baseline_hwm_mb": baseline,
            "peak_hwm_mb": vm_hwm_mb()}


def probe_onnxruntime(path: str, threads: int) -> dict:
    import numpy as np
    import onnxruntime as ort
    types = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int32)": np.int32,
             "tensor(int64)": np.int64}
    baseline = vm_hwm_mb()
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    t0 = time.perf_counter()
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    t1 = time.perf_counter()
    feed = {i.name: np.zeros(i.shape, types[i.type]) for i in session.get_inputs()}
    session.run(None, feed)
    t2 = time.perf_counter()
    session.run(None, feed)
    t3 = time.perf_counter()
    return {"load_s": t1 - t0, "first_run_s": t2 - t1, "warm_run_s": t3 - t2, "baseline_hwm_mb": baseline,
            "peak_hwm_mb": vm_hwm_mb()}


def run_probe(kind: str, path: str, threads: int) -> dict:
    """Runs this file in a fresh interpreter (same environment) and returns its JSON."""
    import subprocess
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([repo, os.environ.get("PYTHONPATH", "")]))
    for attempt in range(8):
        done = subprocess.run([sys.executable, os.path.abspath(__file__), kind, path, str(threads)],
                              capture_output=True, text=True, env=env, timeout=600)
        # On a shared development tree the runtime library may be relinked under us: retry that.
        if done.returncode == 0 or "ImportError" not in done.stderr:
            break
        time.sleep(15)
    if done.returncode != 0:
        raise RuntimeError(f"memory probe {kind} {path} failed (exit {done.returncode}): {done.stderr.strip()[-800:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    kind, model_path = sys.argv[1], sys.argv[2]
    n_threads = int(sys.argv[3]) if len(sys.argv) > 3 else os.cpu_count()
    if kind == "modelrunner":
        result = probe_modelrunner(model_path)
    elif kind == "onnxruntime":
        result = probe_onnxruntime(model_path, n_threads)
    else:
        raise SystemExit(f"unknown probe kind '{kind}' (modelrunner or onnxruntime)")
    print(json.dumps(result))
