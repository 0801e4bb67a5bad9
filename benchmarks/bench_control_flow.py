"""Run-time Loop step vs compile-time unrolling vs onnxruntime on one recurrent model:
h <- tanh(h @ W + x[i]) over T steps with the states scanned out (tests/compiler/
control_flow_models.scan_loop_model). Reports, per T: compile time, PopEF size and per-call
latency (interleaved, so all contenders see the same machine noise; ratios, not absolute times).

    .venv/bin/python benchmarks/bench_control_flow.py --steps 16 64 256
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import compiler.converter.passes.unroll_control_flow as unroll  # noqa: E402
from benchmarks.interleaved_timing import interleaved  # noqa: E402
from compiler import Compiler  # noqa: E402
from tests.compiler.control_flow_models import scan_loop_model  # noqa: E402
from tf_popef_op import runtime  # noqa: E402


def compile_timed(model, unroll_limit):
    saved = unroll.MAX_UNROLLED_ITERATIONS
    unroll.MAX_UNROLLED_ITERATIONS = unroll_limit
    try:
        start = time.perf_counter()
        executable = Compiler.compile(model.SerializeToString())
        return executable, time.perf_counter() - start
    finally:
        unroll.MAX_UNROLLED_ITERATIONS = saved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--budget", type=float, default=3.0, help="seconds of timing per T")
    args = parser.parse_args()
    import onnxruntime as ort

    print("| T | unrolled: compile s / PopEF KiB / steps | Loop step: compile s / PopEF KiB | latency unrolled µs | "
          "latency Loop µs | onnxruntime µs | Loop / unrolled | Loop / onnxruntime |")
    print("|---:|---|---|---:|---:|---:|---:|---:|")
    for steps in args.steps:
        model = scan_loop_model(steps)
        x = np.random.default_rng(0).standard_normal((steps, 2, 3)).astype(np.float32)
        unrolled, t_unrolled = compile_timed(model, unroll.MAX_UNROLLED_ITERATIONS)
        looped, t_looped = compile_timed(model, 0)  # over the limit: kept as a Loop step
        assert [s["op"] for s in looped.executable["programs"]["main"]] == ["Loop"]
        oracle = model.__class__()
        oracle.CopyFrom(model)
        oracle.ir_version = 8
        session = ort.InferenceSession(oracle.SerializeToString(), providers=["CPUExecutionProvider"])
        with runtime.ModelRunner(unrolled) as a, runtime.ModelRunner(looped) as b:
            want = session.run(None, {"x": x})
            for runner in (a, b):
                got = runner.execute({"x": x})
                np.testing.assert_allclose(got["h_all"], want[1], rtol=1e-5, atol=1e-6)
            times = interleaved({"unrolled": lambda: a.execute({"x": x}), "loop": lambda: b.execute({"x": x}),
                                 "onnxruntime": lambda: session.run(None, {"x": x})},
                                warmup=20, min_iters=50, max_iters=100000, budget_s=args.budget)
        med = {k: float(np.median(v)) * 1e6 for k, v in times.items()}
        n_steps = len(unrolled.executable["programs"]["main"])
        print(f"| {steps} | {t_unrolled:.2f} / {len(unrolled.to_bytes()) / 1024:.0f} / {n_steps} | "
              f"{t_looped:.2f} / {len(looped.to_bytes()) / 1024:.0f} | {med['unrolled']:.1f} | {med['loop']:.1f} | "
              f"{med['onnxruntime']:.1f} | {med['loop'] / med['unrolled']:.2f} | "
              f"{med['loop'] / med['onnxruntime']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
