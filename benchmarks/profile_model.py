"""Per-op profile of a model on the emulator: where does the time of one run go?

Compiles the model first when it is not a PopEF (ONNX file, SavedModel folder, .keras), runs it
`--iters` times on random inputs with profiling on, and prints the steps and the op types sorted
by time, plus the runtime's own dispatch cost per run.

    .venv/bin/python benchmarks/profile_model.py MODEL.popef|MODEL.onnx [--batch N] [--iters 50] [--top 25]
    .venv/bin/python benchmarks/profile_model.py model.onnx --json profile.json   # raw entries too
"""
import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tf_popef_op import runtime  # noqa: E402
from tf_popef_op.runtime import ModelRunner, RuntimeConfig, format_profile  # noqa: E402


def load_popef(model: str, batch):
    """Path of a PopEF as is; anything else compiled (batch: CompilerOptions.batch_size)."""
    if model.endswith(".popef"):
        return model
    from compiler import Compiler  # noqa: E402 (only needed to compile)
    from compiler.options import CompilerOptions
    t0 = time.perf_counter()
    exe = Compiler.compile(model, options=CompilerOptions(batch_size=batch))
    print(f"compiled {model} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return exe


def random_feeds(runner, batch, rng):
    feeds = {}
    for d in runner.get_execute_inputs():
        shape = list(d.shape)
        if batch is not None and d.batch_axis >= 0 and shape:
            shape[d.batch_axis] = batch
        dtype = d.numpy_data_type()
        if dtype.kind == "f":
            feeds[d.name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind == "b":
            feeds[d.name] = rng.integers(0, 2, shape).astype(dtype)
        else:  # integer inputs are usually indices or token ids: keep them small and valid
            feeds[d.name] = rng.integers(0, 2, shape).astype(dtype)
    return feeds


def profiled_runs(runner, feeds, iters: int, warmup: int) -> float:
    """`warmup` runs, then `iters` runs with a fresh profile (the runner was made with
    RuntimeConfig(profile=True)); returns the wall seconds per timed run."""
    for _ in range(warmup):
        runner.execute(feeds)
    runner.reset_profile()
    t0 = time.perf_counter()
    for _ in range(iters):
        runner.execute(feeds)
    return (time.perf_counter() - t0) / iters


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="a .popef file, or a model the compiler accepts (compiled first)")
    ap.add_argument("--batch", type=int, default=None, help="compile at / feed this batch size")
    ap.add_argument("--iters", type=int, default=50, help="profiled runs")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--top", type=int, default=25, help="steps to list (0: all)")
    ap.add_argument("--json", help="also write the raw profile entries and summary to this file")
    args = ap.parse_args()

    popef = load_popef(args.model, args.batch)
    rng = np.random.default_rng(0)
    with ModelRunner(popef, RuntimeConfig(profile=True)) as runner:
        feeds = random_feeds(runner, args.batch, rng)
        wall = profiled_runs(runner, feeds, args.iters, args.warmup)
        entries, summary = runner.profile(), runner.profile_summary()
    print(f"# {args.model}: {args.iters} runs, {runtime.num_threads()} intra-op threads, "
          f"{wall * 1e3:.3f} ms per execute (Python round trip included)\n")
    print(format_profile(entries, summary, top=args.top or None))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "iters": args.iters, "entries": entries, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
