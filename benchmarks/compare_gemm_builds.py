"""Two builds' MatMul kernels against each other, shape by shape (bench_packed_gemm.py's shapes):
each checkout times one MatMul with a weight B per shape in a process of its own (its own
compiler and runtime, TF_POPEF_GEMM as given), the two checkouts' processes alternating for
several rounds. The figure per shape and build is the fastest run over all rounds: on a shared
machine the minimum is the run that other processes left alone, where a median mostly measures
their load.

    .venv/bin/python benchmarks/compare_gemm_builds.py OLD_CHECKOUT NEW_CHECKOUT \
        [--shapes bert vit convnext] [--precision fp32] [--threads 1] [--rounds 3] [--runs 25]

Prints a markdown table: fastest ms of each build and new/old (lower is better).
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _time_shapes(shapes, precision, runs, gemm):
    """In the checkout's process (its working directory): print {shape: fastest ms} as JSON."""
    import numpy as np
    from bench_packed_gemm import matmul_model, runner_with
    from compiler import Compiler
    from compiler.converter import Converter
    fastest = {}
    for m, k, n in shapes:
        model = matmul_model((m, k, n))
        executable = Compiler.compile(Converter(precision=precision).convert(model).SerializeToString(), ["Y"])
        runner = runner_with(executable, gemm)
        dtype = runner.get_execute_inputs()[0].numpy_data_type()
        feed = {"X": np.random.default_rng(1).standard_normal((m, k)).astype(dtype)}
        out = {"Y": np.zeros((m, n), dtype)}
        for _ in range(2):
            runner.execute(feed, out)
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            runner.execute(feed, out)
            times.append((time.perf_counter() - start) * 1e3)
        fastest[f"{m}x{k}x{n}"] = min(times)
    print(json.dumps(fastest))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkouts", nargs=2, help="OLD and NEW checkouts")
    ap.add_argument("--shapes", nargs="+", default=["bert", "vit", "convnext"])
    ap.add_argument("--precision", default="fp32", choices=["fp32", "fp16"])
    ap.add_argument("--threads", type=int, default=1, help="TF_POPEF_NUM_THREADS of both builds")
    ap.add_argument("--gemm", default="auto", choices=["auto", "packed", "blas"], help="TF_POPEF_GEMM")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=25, help="timed runs per shape, round and build")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    # The child runs in its checkout (cwd) and imports that checkout's bench_packed_gemm, which
    # puts its own checkout's compiler and runtime first on the path.
    sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks") if args.child else HERE)
    from bench_packed_gemm import SHAPES
    shapes = [shape for family in args.shapes for shape in SHAPES[family]]
    if args.child:
        _time_shapes(shapes, args.precision, args.runs, args.gemm)
        return
    best = [{}, {}]
    for _ in range(args.rounds):
        for i, checkout in enumerate(args.checkouts):
            checkout = os.path.abspath(checkout)
            env = dict(os.environ, TF_POPEF_NUM_THREADS=str(args.threads))
            cmd = [sys.executable, os.path.abspath(__file__), *args.checkouts,
                   "--shapes", *args.shapes, "--precision", args.precision, "--gemm", args.gemm, "--runs",
                   str(args.runs), "--child", "1"]
            out = subprocess.run(cmd, cwd=checkout, env=env, check=True, stdout=subprocess.PIPE, text=True).stdout
            for shape, ms in json.loads(out.strip().splitlines()[-1]).items():
                best[i][shape] = min(ms, best[i].get(shape, ms))
    print(f"old: {args.checkouts[0]}\nnew: {args.checkouts[1]}\n{args.precision}, {args.threads} thread(s), "
          f"TF_POPEF_GEMM={args.gemm}, {args.rounds} rounds x {args.runs} runs, fastest run, "
          f"load average {os.getloadavg()[0]:.1f}\n")
    print("| M x K x N | old ms | new ms | new/old |\n|---|---:|---:|---:|")
    for shape, old in best[0].items():
        print(f"| {shape} | {old:.3f} | {best[1][shape]:.3f} | {best[1][shape] / old:.2f} |")


if __name__ == "__main__":
    main()
