"""How each runtime's unprofiled latency scales from 1 to 2 (or more) threads on one cached model:
ours (the cached default-option PopEF of --batch and --precision), OpenVINO (latency hint, its
inference threads set to the same count, threads not pinned, as blocks_vs_openvino.py and
bench_models.py set it up) and onnxruntime (intra-op threads set to it, spinning on, as for
block timing). Every (contender, threads) cell runs in a process of its own (--runs untimed
warm-up runs, then --runs timed ones; median), the cells alternating for --rounds rounds (the
order reversed every round); a cell's figure is the median of its rounds. Where the contenders
are level at one thread, the speed-up column says whose second thread pays the least for
splitting each step.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/thread_scaling.py [--model mobilenet_v2] [--batch 1] \
        [--precision fp32] [--threads 1 2] [--rounds 6] [--runs 40]
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
from interleaved_timing import warm_median  # noqa: E402
CACHE = os.path.join(HERE, ".cache")
CONTENDERS = ("ours", "openvino", "onnxruntime")


def _runner(which: str, model: str, batch: int, precision: str, threads: int):
    """A no-argument callable that runs `which` once on the cached model."""
    onnx_path = sorted(glob.glob(os.path.join(CACHE, f"{model}-*.onnx")))[0]
    if which == "ours":
        from profile_model import random_feeds
        from tf_popef_op.runtime import ModelRunner
        popef = sorted(glob.glob(os.path.join(CACHE, f"{model}-*-b{batch}-{precision}.popef")))[0]
        runner = ModelRunner(popef)
        feeds = random_feeds(runner, batch, np.random.default_rng(0))
        return lambda: runner.execute(feeds)
    if precision != "fp32":
        raise SystemExit(f"{which}: only fp32 here (the peers' fp16 set-ups are bench_models.py's)")
    if which == "openvino":
        from blocks_vs_openvino import _openvino_request
        request, _feed = _openvino_request(onnx_path, batch, threads, profile=False)
        return request.infer
    import onnx
    from onnxruntime_peer import cpu_session
    session = cpu_session(onnx.load(onnx_path), threads, spinning=True)
    inp = session.get_inputs()[0]
    x = np.random.default_rng(0).standard_normal([batch] + list(inp.shape[1:])).astype(np.float32)
    return lambda: session.run(None, {inp.name: x})


def _worker(which: str, model: str, batch: int, precision: str, threads: int, runs: int) -> None:
    print(json.dumps(warm_median(_runner(which, model, batch, precision, threads), runs) * 1e3))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="mobilenet_v2")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--precision", default="fp32")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--contenders", nargs="+", choices=CONTENDERS, default=list(CONTENDERS))
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--runs", type=int, default=40)
    p.add_argument("--worker", nargs=2, metavar=("CONTENDER", "THREADS"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        return _worker(args.worker[0], args.model, args.batch, args.precision, int(args.worker[1]), args.runs)
    cells = [(c, t) for t in args.threads for c in args.contenders]
    times = {cell: [] for cell in cells}
    print(f"{args.model} b{args.batch} {args.precision}; {args.rounds} rounds of {args.runs} runs; "
          f"load average {os.getloadavg()[0]:.2f}")
    for r in range(args.rounds):
        for which, threads in (cells if r % 2 == 0 else cells[::-1]):
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--model", args.model, "--batch",
                                  str(args.batch), "--precision", args.precision, "--runs", str(args.runs),
                                  "--worker", which, str(threads)], capture_output=True, text=True,
                                 env=dict(os.environ, TF_POPEF_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads)))
            if out.returncode != 0:
                raise SystemExit(f"{which} on {threads} threads failed:\n{out.stderr[-3000:]}")
            times[(which, threads)].append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"load average {os.getloadavg()[0]:.2f}")
    first = args.threads[0]
    print("| contender | " + " | ".join(f"{t} threads ms" for t in args.threads) + " | " +
          " | ".join(f"speed-up {first}→{t}" for t in args.threads[1:]) + " |")
    print("|---|" + "---:|" * (2 * len(args.threads) - 1))
    for which in args.contenders:
        ms = [statistics.median(times[(which, t)]) for t in args.threads]
        print(f"| {which} | " + " | ".join(f"{m:.3f}" for m in ms) + " | " +
              " | ".join(f"{ms[0] / m:.2f}" for m in ms[1:]) + " |")


if __name__ == "__main__":
    main()
