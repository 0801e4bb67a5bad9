"""Our profile of a cached PopEF, for comparing two runtimes on the same PopEF: run it from each
checkout in turn (the working directory's runtime is the one measured), e.g.

    for i in 1 2 3; do for c in /work/main .; do (cd $c && PYTHONPATH=$PWD \\
        .venv/bin/python <this checkout>/benchmarks/profile_cached_classes.py efficientnet_b0 1 --iters 20); done; done

MODEL is the export name in benchmarks/.cache (the part before the first '-'); the PopEF read is
<export>-b<BATCH>-<precision>.popef there, as bench_models.py --parts compile wrote it. Prints
the profiled run and each op class's ms per run (op_profiles.modelrunner_by_op); with
`--steps OP [OP ...]`, one JSON line instead: the median profiled run and each step of those op
types' median µs over the runs (after one warm-up run); `--stat min` gives each step's fastest run
instead, its undisturbed time (short steps split over both cores stretch whenever another
process takes either core, which moves their medians far more than the runs')."""
import argparse
import copy
import glob
import json
import os
import statistics
import sys

import numpy as np
import onnx

# The checkout being measured is the working directory: its runtime, compiler and op classes.
sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
import op_profiles  # noqa: E402


def step_times(runner, ops, iters: int, stat=statistics.median) -> dict:
    """The median profiled run and each `ops` step's µs (`stat` over the runs), keyed 'op|node'."""
    from profile_model import random_feeds
    feed = random_feeds(runner, None, np.random.default_rng(0))
    outs = {o.name: np.zeros(o.shape, o.numpy_data_type()) for o in runner.get_execute_outputs()}
    runner.execute(feed, outs)
    steps, runs = {}, []
    for _ in range(iters):
        runner.reset_profile()
        runner.execute(feed, outs)
        runs.append(runner.profile_summary()["run_us"])
        for e in runner.profile():
            if e["op"] in ops:
                steps.setdefault(f"{e['op']}|{e['node']}", []).append(e["total_us"])
    return {"run_us": statistics.median(runs),
            "steps_us": {name: stat(us) for name, us in steps.items()}}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("batch", type=int)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "fp16"])
    parser.add_argument("--steps", nargs="+", metavar="OP", help="time each step of these op types instead")
    parser.add_argument("--stat", default="median", choices=["median", "min"], help="--steps: each step's median or fastest run")
    args = parser.parse_args()
    from compiler import Executable
    from compiler.converter import Converter
    from tf_popef_op.runtime import ModelRunner, RuntimeConfig
    cache = os.path.join("benchmarks", ".cache")
    exports = sorted(glob.glob(os.path.join(cache, f"{args.model}-*.onnx")))
    if not exports:
        raise SystemExit(f"no ONNX export of {args.model} in {cache}")
    executable = Executable.load(f"{exports[0][:-len('.onnx')]}-b{args.batch}-{args.precision}.popef")
    if args.steps:
        stat = statistics.median if args.stat == "median" else min
        print(json.dumps(step_times(ModelRunner(executable, RuntimeConfig(profile=True)), args.steps, args.iters, stat)))
        return
    converted = Converter(batch_size=args.batch, precision="fp32").convert(copy.deepcopy(onnx.load(exports[0])))
    (anchor,) = ModelRunner(executable).get_execute_inputs()
    x = np.random.default_rng(0).standard_normal(anchor.shape).astype(np.float32)
    profile = op_profiles.modelrunner_by_op(executable, x, args.iters, converted)
    print(f"  run {profile['run_us'] / 1000:.3f} ms")
    for cls, us in profile["by_class_us"].items():
        print(f"  {cls:40s} {us / 1000:8.3f} ms")


if __name__ == "__main__":
    main()
