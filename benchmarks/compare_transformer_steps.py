"""BERT's and ViT's steps on two (or more) builds' runtimes: per op type, with the dense layers
split into the Q/K/V projection, the attention output projection and the two FFN layers (the
Dense layers' numbers alternate: in BERT the odd ones carry the Gelu, in ViT-Tiny the even
ones), µs per run. Each checkout's runtime profiles the same PopEFs in its own process (one
extension module per process), the processes alternating for `--rounds` (which one goes first
swaps every round); a row's time is the median (and the minimum) over the rounds of the
step's mean over `--iters` profiled runs. A checkout may carry environment settings after
colons, so one build's run-time switches compare too.

    .venv/bin/python benchmarks/compare_transformer_steps.py /work/main /work/wt/x \
        benchmarks/.cache/bert_encoder-...-b8-fp32.popef benchmarks/.cache/vit_encoder-...-b8-fp32.popef \
        [--rounds 4] [--iters 10] [--threads 2]
    .venv/bin/python benchmarks/compare_transformer_steps.py CHECKOUT:TF_POPEF_GEMM=blas CHECKOUT MODEL.popef
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile


def step_class(op: str, node: str) -> str:
    if op != "FusedMatMul":
        return op
    if "qkv" in node:
        return "GEMM Q/K/V"
    if "attention_output_1/MatMul" in node:
        return "GEMM attention output"
    if "dense_" in node:
        number = int(node.split("dense_")[1].split("_")[0].split("/")[0])
        return "GEMM dense (even)" if number % 2 == 0 else "GEMM dense (odd)"
    return op


def profile(checkout: str, popef: str, iters: int, threads: int) -> dict:
    path, *settings = checkout.split(":")
    env = dict(os.environ, PYTHONPATH=path, TF_POPEF_NUM_THREADS=str(threads))
    env.update(dict(s.split("=", 1) for s in settings))
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "profile.json")
        subprocess.run([sys.executable, os.path.join(path, "benchmarks", "profile_model.py"), popef, "--iters",
                        str(iters), "--json", out], env=env, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        with open(out) as f:
            d = json.load(f)
    steps = collections.defaultdict(float)
    for e in d["entries"]:
        steps[step_class(e["op"], e["node"])] += e["total_us"] / d["iters"]
    steps["all steps"] = sum(steps.values())
    return steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkouts", nargs="+", help="two or more checkouts (PATH[:VAR=VALUE...]), then the PopEFs")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    checkouts = [c for c in args.checkouts if not c.endswith(".popef")]
    popefs = [c for c in args.checkouts if c.endswith(".popef")]
    if len(checkouts) < 2 or not popefs:
        raise SystemExit("give at least two checkouts and one PopEF")
    times = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in range(args.rounds):
        for c in checkouts if r % 2 == 0 else checkouts[::-1]:
            for p in popefs:
                for step, us in profile(c, p, args.iters, args.threads).items():
                    times[(os.path.basename(p), step)][c].append(us)
    print(f"# {args.rounds} rounds of {args.iters} profiled runs, {args.threads} threads, "
          f"load average {os.getloadavg()[0]:.1f}; µs per run, median (min) over rounds; last / first")
    print("| PopEF | steps | " + " | ".join(checkouts) + " | ratio median (min) |")
    print("|---|---|" + "---:|" * (len(checkouts) + 1))
    for (p, step), by in sorted(times.items()):
        meds = [statistics.median(by[c]) for c in checkouts]
        mins = [min(by[c]) for c in checkouts]
        if max(meds) < 100:
            continue
        cells = " | ".join(f"{m:.0f} ({n:.0f})" for m, n in zip(meds, mins))
        print(f"| {p} | {step} | {cells} | {meds[-1] / meds[0]:.3f} ({mins[-1] / mins[0]:.3f}) |")


if __name__ == "__main__":
    main()
