"""Per-step time of chosen op types on a cached PopEF, for comparing two runtimes on the same
PopEF step by step: run it from each checkout in turn (the working directory's runtime is the
one measured), e.g.

    for i in 1 2 3; do for c in $OLD $NEW; do (cd $c && PYTHONPATH=$PWD .venv/bin/python \\
        $NEW/benchmarks/step_times.py inception_v3 1 NchwcAveragePool NchwcMaxPool --iters 20) \\
        >> /tmp/steps_$(basename $c).jsonl; done; done

MODEL is the export name in benchmarks/.cache (the part before the first '-'); the PopEF read is
<export>-b<BATCH>-<precision>.popef there. Prints one JSON line: the median profiled run and
each matching step's median µs over --iters profiled runs (after one warm-up run)."""
import argparse
import glob
import json
import os
import statistics

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("batch", type=int)
    parser.add_argument("ops", nargs="+", help="op types whose steps are timed")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "fp16"])
    args = parser.parse_args()
    from compiler import Executable
    from tf_popef_op.runtime import ModelRunner, RuntimeConfig
    cache = os.path.join("benchmarks", ".cache")
    exports = sorted(glob.glob(os.path.join(cache, f"{args.model}-*.onnx")))
    if not exports:
        raise SystemExit(f"no ONNX export of {args.model} in {cache}")
    runner = ModelRunner(Executable.load(f"{exports[0][:-len('.onnx')]}-b{args.batch}-{args.precision}.popef"),
                         RuntimeConfig(profile=True))
    (anchor,) = runner.get_execute_inputs()
    feed = {anchor.name: np.random.default_rng(0).standard_normal(anchor.shape).astype(anchor.numpy_data_type())}
    outs = {o.name: np.zeros(o.shape, o.numpy_data_type()) for o in runner.get_execute_outputs()}
    runner.execute(feed, outs)
    steps, runs = {}, []
    for _ in range(args.iters):
        runner.reset_profile()
        runner.execute(feed, outs)
        runs.append(runner.profile_summary()["run_us"])
        for e in runner.profile():
            if e["op"] in args.ops:
                steps.setdefault(f"{e['op']}|{e['node']}", []).append(e["total_us"])
    print(json.dumps({"run_us": statistics.median(runs),
                      "steps_us": {name: statistics.median(us) for name, us in steps.items()}}))


if __name__ == "__main__":
    main()
