"""EfficientNetB0's squeeze-and-excite fold, per step: the PopEFs compare_builds.py compiled for
two builds (OLD = build0-*, NEW = build1-*), profiled alternately on this checkout's runtime, b1
and b8, fp32 and fp16. Per cell, OLD → NEW ms per run of: the excitation Mul steps, the NchwcConv
steps (the project convolutions that took the Mul's scale are among them), everything else, and
the whole profiled run; and each PopEF's output against OLD's fp32 (max |diff| / max |output|,
inputs uniform in [-1, 1]).

    .venv/bin/python benchmarks/squeeze_excite_steps.py /tmp/compare_builds [--rounds 3] [--runs 20]
"""
import argparse
import collections
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from profile_model import profiled_runs  # noqa: E402
from tf_popef_op.runtime import ModelRunner, RuntimeConfig  # noqa: E402

KINDS = ("excitation Mul", "NchwcConv", "other", "profiled run")


def feeds(runner) -> dict:
    rng = np.random.default_rng(0)
    return {d.name: rng.uniform(-1, 1, list(d.shape)).astype(d.numpy_data_type()) for d in runner.get_execute_inputs()}


def profile(path: str, runs: int) -> dict:
    """{kind: µs per run}."""
    runner = ModelRunner(path, RuntimeConfig(profile=True))
    profiled_runs(runner, feeds(runner), runs, warmup=3)
    out = collections.Counter()
    for e in runner.profile():
        kind = "excitation Mul" if "se_excite" in e["node"] else "NchwcConv" if e["op"] == "NchwcConv" else "other"
        out[kind] += e["total_us"] / runs
    out["profiled run"] = sum(out.values())
    return out


def error(path: str, reference: str) -> float:
    ref, run = ModelRunner(reference, RuntimeConfig()), ModelRunner(path, RuntimeConfig())
    x = feeds(ref)
    want = next(iter(ref.execute(x).values())).astype(np.float64)
    got = run.execute({k: v.astype(d.numpy_data_type()) for (k, v), d in zip(x.items(), run.get_execute_inputs())})
    return float(np.abs(next(iter(got.values())).astype(np.float64) - want).max() / np.abs(want).max())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", help="compare_builds.py --out folder")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=20, help="profiled runs per round (a third at batch 8)")
    args = ap.parse_args()
    print("| cell | " + " | ".join(f"{k} ms" for k in KINDS) + " | error OLD → NEW | load avg |")
    print("|---|" + "---|" * len(KINDS) + "---|---:|")
    for b in (1, 8):
        for precision in ("fp32", "fp16"):
            paths = [os.path.join(args.folder, f"build{i}-efficientnet_b0-b{b}-{precision}.popef") for i in (0, 1)]
            reference = os.path.join(args.folder, f"build0-efficientnet_b0-b{b}-fp32.popef")
            runs = args.runs if b == 1 else max(3, args.runs // 3)
            rounds = [[profile(p, runs) for p in paths] for _ in range(args.rounds)]
            med = [{k: statistics.median(r[i][k] for r in rounds) / 1e3 for k in KINDS} for i in (0, 1)]
            errors = " → ".join(f"{error(p, reference):.1e}" for p in paths)
            print(f"| b{b} {precision} | " + " | ".join(f"{med[0][k]:.2f} → {med[1][k]:.2f}" for k in KINDS) +
                  f" | {errors} | {os.getloadavg()[0]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
