"""Two PopEFs of one model (compiled by two compiler versions, or with two option sets) on this
runtime: their layout-conversion steps, profiled time per op class, and latency timed
interleaved (A, B, B, A...), so machine load hits both alike. Checks that their outputs agree.

    .venv/bin/python benchmarks/compare_popefs.py A.popef B.popef [A2.popef B2.popef ...]
        [--iters 30] [--profile-iters 5] [--label NAME ...]

Prints one markdown row per pair: ToNchwc + FromNchwc steps, the classes of op_classes.py that
layouts move between (Layout/copy, Pooling/reduce, Elementwise, Concat), the profiled run, the
median latency of each and B / A, and the load average when the pair was timed.
"""
import argparse
import collections
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from op_classes import op_class  # noqa: E402
from profile_model import profiled_runs  # noqa: E402
from tf_popef_op.runtime import ModelRunner, RuntimeConfig  # noqa: E402

CLASSES = ("Layout/copy", "Pooling/reduce", "Elementwise", "Concat")
CONVERSIONS = ("ToNchwc", "FromNchwc")


def random_feeds(runner) -> dict:
    rng = np.random.default_rng(0)
    return {d.name: rng.standard_normal(list(d.shape)).astype(d.numpy_data_type())
            for d in runner.get_execute_inputs()}


def program_ops(path: str) -> collections.Counter:
    """{op: steps} of the PopEF's main program."""
    from compiler.executable import Executable
    return collections.Counter(s["op"] for s in Executable.load(path).executable["programs"]["main"])


def profile(path: str, feeds: dict, iters: int):
    """({op class: ms per run}, profiled ms per run)."""
    runner = ModelRunner(path, RuntimeConfig(profile=True))
    profiled_runs(runner, feeds, iters, warmup=1)
    classes = collections.Counter()
    for e in runner.profile():
        classes[op_class(e["op"], "conv")] += e["total_us"] / iters / 1e3
    summary = runner.profile_summary()
    return classes, summary["run_us"] / (summary.get("runs") or iters) / 1e3


def interleaved(paths, feeds: dict, iters: int):
    """Median ms per run of each PopEF, their runs alternating in order A B, B A, ..."""
    runners = [ModelRunner(p, RuntimeConfig()) for p in paths]
    outputs = [r.execute(feeds) for r in runners]
    for name, want in outputs[0].items():
        got = outputs[1][name]
        scale = max(1.0, float(np.max(np.abs(want))))
        if want.shape != got.shape or float(np.max(np.abs(want - got))) > 1e-3 * scale:
            raise SystemExit(f"{paths[1]}: output '{name}' differs from {paths[0]}'s "
                             f"(max |diff| {float(np.max(np.abs(want - got))):.3g}, scale {scale:.3g})")
    times = [[], []]
    for i in range(iters):
        for k in ((0, 1) if i % 2 == 0 else (1, 0)):
            t0 = time.perf_counter()
            runners[k].execute(feeds)
            times[k].append(time.perf_counter() - t0)
    return [statistics.median(t) * 1e3 for t in times]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("popefs", nargs="+", help="pairs: A.popef B.popef ...")
    ap.add_argument("--iters", type=int, default=30, help="interleaved runs of each")
    ap.add_argument("--profile-iters", type=int, default=5)
    ap.add_argument("--label", nargs="+", help="a name per pair (default: B's file name)")
    args = ap.parse_args()
    if len(args.popefs) % 2:
        ap.error("give the PopEFs in pairs (A B)")
    pairs = list(zip(args.popefs[0::2], args.popefs[1::2]))
    labels = args.label or [os.path.basename(b) for _, b in pairs]
    if len(labels) != len(pairs):
        ap.error(f"{len(labels)} labels for {len(pairs)} pairs")
    print("| model | ToNchwc + FromNchwc steps | " + " | ".join(f"{c} ms" for c in CLASSES) +
          " | profiled run ms | median latency ms | B / A | load avg |")
    print("|---|---|" + "---|" * len(CLASSES) + "---|---|---:|---:|")
    for label, (a, b) in zip(labels, pairs):
        feeds = random_feeds(ModelRunner(a, RuntimeConfig()))
        (lat_a, lat_b), load = interleaved((a, b), feeds, args.iters), os.getloadavg()[0]
        (ca, ra), (cb, rb) = (profile(p, feeds, args.profile_iters) for p in (a, b))
        conv = " → ".join(" + ".join(str(ops[op]) for op in CONVERSIONS) for ops in map(program_ops, (a, b)))
        cells = " | ".join(f"{ca[c]:.1f} → {cb[c]:.1f}" for c in CLASSES)
        print(f"| {label} | {conv} | {cells} | {ra:.1f} → {rb:.1f} | {lat_a:.1f} → {lat_b:.1f} | "
              f"{lat_b / lat_a:.2f} | {load:.1f} |", flush=True)


if __name__ == "__main__":
    main()
