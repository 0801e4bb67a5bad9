"""Two builds of tf-popef (compiler and runtime) against each other on the same networks: each
checkout compiles its own PopEFs from the same cached ONNX exports (benchmarks/.cache, written
by `bench_models.py --parts compile`), then one process per checkout times every cell in a
block (untimed warm-up runs, then timed runs; median), the two checkouts' processes
alternating for several rounds (which one goes first swaps every round). Two runtimes cannot share a process (one extension module
name), so blocks in alternating processes are how they share the machine's noise.

    .venv/bin/python benchmarks/compare_builds.py OLD_CHECKOUT NEW_CHECKOUT [--rounds 3] \
        [--models mobilenet_v2 resnet50 bert_encoder ...]   # export names in benchmarks/.cache

Each checkout must be built (`setup.py build_ext --inplace`). Prints the median over rounds of
each cell's median, in ms, and fp16/fp32 per build.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time

import numpy as np

CACHE = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".cache")
MODELS = ("mobilenet_v2", "resnet50")


def _cells(models):
    return [(m, b, p) for m in models for b in (1, 8) for p in ("fp32", "fp16")]


def _export(model: str) -> str:
    """The cached ONNX export of `model` (its name up to the first '-')."""
    exports = sorted(glob.glob(os.path.join(CACHE, f"{model}-*.onnx")))
    if not exports:
        raise SystemExit(f"no ONNX export of {model} in {CACHE}: run `bench_models.py --parts compile` first")
    return exports[0]


def _popef(out: str, tag: str, model: str, batch: int, precision: str) -> str:
    return os.path.join(out, f"{tag}-{model}-b{batch}-{precision}.popef")


def _compile(out: str, tag: str, models) -> None:
    """In the checkout's process: compile every cell with that checkout's compiler."""
    import onnx
    from benchmarks.compile_stages import compile_with_stages
    for model, batch, precision in _cells(models):
        executable = compile_with_stages(onnx.load(_export(model)), batch, precision)[0]
        executable.save(_popef(out, tag, model, batch, precision))


def _time(out: str, tag: str, warmup: int, runs: int, models) -> None:
    """In the checkout's process: print {cell: median ms} as JSON."""
    from tf_popef_op import runtime
    medians = {}
    for model, batch, precision in _cells(models):
        config = runtime.RuntimeConfig()
        config.batching_dim, config.timeout_ns = 0, 0
        runner = runtime.ModelRunner(_popef(out, tag, model, batch, precision), config)
        rng = np.random.default_rng(0)
        feeds = {i.name: rng.standard_normal(i.shape).astype(i.numpy_data_type())
                 for i in runner.get_execute_inputs()}
        for _ in range(warmup):
            runner.execute(feeds)
        seconds = []
        for _ in range(runs if batch == 1 else max(3, runs // 2)):
            start = time.perf_counter()
            runner.execute(feeds)
            seconds.append(time.perf_counter() - start)
        medians[f"{model} b{batch} {precision}"] = float(np.median(seconds) * 1e3)
        runner.close()
    print(json.dumps(medians))


def _run(checkout: str, *args: str) -> str:
    result = subprocess.run([sys.executable, os.path.abspath(__file__), *args], cwd=checkout,
                            env=dict(os.environ, PYTHONPATH=checkout, TF_CPP_MIN_LOG_LEVEL="2"),
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{checkout}: {' '.join(args)} failed:\n{result.stderr[-3000:]}")
    return result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkouts", nargs="*", help="OLD and NEW checkouts")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--runs", type=int, default=15, help="timed runs per cell (half at batch 8)")
    parser.add_argument("--out", default="/tmp/compare_builds")
    parser.add_argument("--models", nargs="+", default=list(MODELS),
                        help="cached ONNX exports by name (the part before the first '-')")
    parser.add_argument("--worker", nargs=2, metavar=("MODE", "TAG"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        mode, tag = args.worker
        sys.path.insert(0, os.getcwd())
        if mode == "compile":
            _compile(args.out, tag, args.models)
        else:
            _time(args.out, tag, args.warmup, args.runs, args.models)
        return
    if len(args.checkouts) != 2 or len({os.path.realpath(c) for c in args.checkouts}) != 2:
        parser.error("give the OLD and the NEW checkout (two different folders)")
    os.makedirs(args.out, exist_ok=True)
    tags = {c: f"build{i}" for i, c in enumerate(args.checkouts)}
    models = ["--models", *args.models]
    for model in args.models:
        _export(model)  # a missing export fails here, before any compile
    for checkout, tag in tags.items():
        _run(checkout, "--out", args.out, *models, "--worker", "compile", tag)
    rounds = {c: [] for c in args.checkouts}
    for r in range(args.rounds):
        # Which checkout runs first swaps every round: the second process of a round was
        # measured slower on unchanged code (up to 1.13x), which would bias one side.
        for checkout, tag in list(tags.items())[::1 if r % 2 == 0 else -1]:
            rounds[checkout].append(json.loads(_run(
                checkout, "--out", args.out, "--warmup", str(args.warmup), "--runs", str(args.runs), *models,
                "--worker", "time", tag)))
    old, new = args.checkouts
    median = {c: {cell: float(np.median([r[cell] for r in rounds[c]])) for cell in rounds[c][0]}
              for c in args.checkouts}
    print(f"old: {old}\nnew: {new}\n{args.rounds} rounds, load average {os.getloadavg()[0]:.1f}\n")
    print("| cell | old ms | new ms | new/old |")
    print("|---|---:|---:|---:|")
    for cell in median[old]:
        print(f"| {cell} | {median[old][cell]:.2f} | {median[new][cell]:.2f} | "
              f"{median[new][cell] / median[old][cell]:.2f} |")
    print("\n| model and batch | fp16/fp32 old | fp16/fp32 new |")
    print("|---|---:|---:|")
    for cell in median[old]:
        if cell.endswith("fp32"):
            half = cell[:-4] + "fp16"
            print(f"| {cell[:-5]} | {median[old][half] / median[old][cell]:.2f} | "
                  f"{median[new][half] / median[new][cell]:.2f} |")


if __name__ == "__main__":
    main()
