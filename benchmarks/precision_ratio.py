"""Our float16 latency over our float32 latency, the two PopEFs of a cached network called
alternately in one process (interleaved_timing.interleaved), so the machine's load falls on both
alike: the figure that says whether float16 is faster. The runtime measured is the working
directory's checkout, so two runtimes compare by running this from each in turn, e.g.

    for i in 1 2 3; do for c in $OLD $NEW; do (cd $c && PYTHONPATH=$c .venv/bin/python \\
        $NEW/benchmarks/precision_ratio.py --models efficientnet_b0 mobilenet_v2 --batch 1 --calls 200); done; done

Reads <export>-b<N>-fp32.popef and -fp16.popef from benchmarks/.cache (or $TF_POPEF_BENCH_CACHE),
as `bench_models.py --parts compile` writes them; prints one JSON line per network: each
precision's median ms and fp16/fp32. With --steps N both runners profile (the step timers cost
both alike) and the N steps whose float16 µs per call exceed float32's most follow, with the
all-steps totals: where the interleaved figure's difference sits, in the same call order.
"""
import argparse
import glob
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))

from interleaved_timing import interleaved  # noqa: E402
from model_zoo import FULL  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["efficientnet_b0"], help="export names in the cache")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--calls", type=int, default=200, help="timed calls of each precision")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=0, metavar="N",
                   help="profile both and list the N steps with the largest fp16 - fp32 us per call")
    args = p.parse_args()
    from tf_popef_op.runtime import ModelRunner, RuntimeConfig
    cache = os.environ.get("TF_POPEF_BENCH_CACHE") or os.path.join(os.getcwd(), "benchmarks", ".cache")
    for model in args.models:
        exports = sorted(glob.glob(os.path.join(cache, f"{model}-*.onnx")))
        if not exports:
            raise SystemExit(f"no ONNX export of {model} in {cache}: run `bench_models.py --parts compile` first")
        calls, runners = {}, {}
        for precision in ("fp32", "fp16"):
            config = RuntimeConfig(profile=args.steps > 0)
            config.batching_dim, config.timeout_ns = 0, 0
            runner = ModelRunner(f"{exports[0][:-len('.onnx')]}-b{args.batch}-{precision}.popef", config)
            (anchor,) = runner.get_execute_inputs()
            # bench_models.py's inputs: with random weights, 0-255 pixels overflow float16 to NaN
            feeds = {anchor.name: FULL[model].inputs(args.batch).astype(anchor.numpy_data_type())}
            outs = {o.name: np.zeros(o.shape, o.numpy_data_type()) for o in runner.get_execute_outputs()}
            calls[precision] = lambda runner=runner, feeds=feeds, outs=outs: runner.execute(feeds, outs)
            runners[precision] = runner
        for _ in range(args.warmup):  # (the first run widens the float16 weight copies: not profiled)
            for call in calls.values():
                call()
        if args.steps:
            for runner in runners.values():
                runner.reset_profile()
        seconds = interleaved(calls, warmup=0, min_iters=args.calls, max_iters=args.calls, budget_s=0)
        ms = {precision: float(np.median(s)) * 1e3 for precision, s in seconds.items()}
        print(json.dumps({"model": model, "batch": args.batch, "fp32_ms": round(ms["fp32"], 3),
                          "fp16_ms": round(ms["fp16"], 3), "fp16/fp32": round(ms["fp16"] / ms["fp32"], 4),
                          "load": os.getloadavg()[0]}))
        if args.steps:
            print_step_excess(runners, args.calls, args.steps)


def print_step_excess(runners, calls, top):
    """Each step's µs per call in the two programs (matched by node name), the largest float16
    excess first."""
    steps = {precision: {e["node"]: (e["op"], e["total_us"] / calls) for e in runner.profile()}
             for precision, runner in runners.items()}
    nodes = set(steps["fp32"]) | set(steps["fp16"])

    def us(precision, node):
        return steps[precision].get(node, ("", 0.0))[1]

    print(f"  all steps us per call: fp32 {sum(us('fp32', n) for n in nodes):.1f}, "
          f"fp16 {sum(us('fp16', n) for n in nodes):.1f}")
    for node in sorted(nodes, key=lambda n: us("fp32", n) - us("fp16", n))[:top]:
        op = (steps["fp16"].get(node) or steps["fp32"][node])[0]
        print(f"    {node[-40:]:40s} {op[:22]:22s} {us('fp32', node):8.1f} {us('fp16', node):8.1f} "
              f"{us('fp16', node) - us('fp32', node):+8.1f}")


if __name__ == "__main__":
    main()
