"""Convolution time by kind, float16 program against float32 program, in one process.

Loads a model's cached PopEFs (benchmarks/.cache/<export>-b<N>-fp32.popef and -fp16.popef, or
in $TF_POPEF_BENCH_CACHE, as `bench_models.py --parts compile` writes them), runs both with the profiler in alternating
blocks (so the machine's load falls on both alike) and prints the conv steps' ms per run by
kernel kind (op_profiles.conv_kinds on the converted model): 1x1, 3x3, 7x7, ... A layer the
float32 program runs as a Winograd convolution is listed apart in both, since the two
programs then run different kernels on it. With --layers, the slowest layers one by one; with
--excess, every step of any op type ranked by how much longer its float16 run takes (µs), and
the op types' totals.

    .venv/bin/python benchmarks/conv_precision_classes.py --models resnet50 [--batch 1] \
        [--rounds 8] [--iters 5] [--layers] [--excess 25]
"""
import argparse
import collections
import glob
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import onnx  # noqa: E402

from compiler import Executable  # noqa: E402
from compiler.converter import Converter  # noqa: E402
from op_profiles import conv_kinds  # noqa: E402
from tf_popef_op.runtime import ModelRunner, RuntimeConfig  # noqa: E402

CACHE = os.environ.get("TF_POPEF_BENCH_CACHE") or os.path.join(ROOT, "benchmarks", ".cache")  # as model_zoo.py
PRECISIONS = ("fp32", "fp16")


def profiled_runners(export: str, batch: int):
    runners = {}
    for precision in PRECISIONS:
        runner = ModelRunner(Executable.load(f"{export}-b{batch}-{precision}.popef"), RuntimeConfig(profile=True))
        (anchor,) = runner.get_execute_inputs()
        x = np.random.default_rng(0).standard_normal(anchor.shape).astype(anchor.numpy_data_type())
        runners[precision] = (runner, {anchor.name: x})
    return runners


def print_excess(steps, kinds, top):
    """Steps and op types by float16 µs − float32 µs per run (a step only one program has counts
    0 in the other: the float16 program's adapters, for instance)."""
    nodes = set(steps["fp32"]) | set(steps["fp16"])

    def us(precision, node):
        return steps[precision].get(node, (None, 0.0))[1]

    def op(node):
        return (steps["fp16"].get(node) or steps["fp32"][node])[0]

    by_op = collections.defaultdict(lambda: [0.0, 0.0])
    for node in nodes:
        by_op[op(node)][0] += us("fp32", node)
        by_op[op(node)][1] += us("fp16", node)
    print(f"  {'op type':28s} {'fp32 us':>9s} {'fp16 us':>9s} {'excess us':>9s}")
    for name, (f32, f16) in sorted(by_op.items(), key=lambda kv: kv[1][0] - kv[1][1]):
        print(f"  {name[:28]:28s} {f32:9.1f} {f16:9.1f} {f16 - f32:+9.1f}")
    print(f"  {'all':28s} {sum(v[0] for v in by_op.values()):9.1f} {sum(v[1] for v in by_op.values()):9.1f} "
          f"{sum(v[1] - v[0] for v in by_op.values()):+9.1f}")
    print(f"  top {top} steps by float16 excess:")
    for node in sorted(nodes, key=lambda n: us("fp32", n) - us("fp16", n))[:top]:
        f32, f16 = us("fp32", node), us("fp16", node)
        print(f"    {node[:44]:44s} {op(node)[:18]:18s} {kinds.get(node, ''):8s} "
              f"{f32:8.1f} {f16:8.1f} {f16 - f32:+8.1f}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["resnet50"], help="export names in benchmarks/.cache")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--iters", type=int, default=5, help="runs per block")
    p.add_argument("--layers", action="store_true")
    p.add_argument("--excess", type=int, default=0, metavar="N",
                   help="also list the N steps (any op) whose float16 time exceeds float32's most")
    args = p.parse_args(argv)
    for model in args.models:
        exports = sorted(glob.glob(os.path.join(CACHE, f"{model}-*.onnx")))
        if not exports:
            raise SystemExit(f"no ONNX export of {model} in {CACHE}: run `bench_models.py --parts compile` first")
        export = exports[0][:-len(".onnx")]
        kinds = conv_kinds(Converter(batch_size=args.batch, precision="fp32").convert(onnx.load(exports[0])))
        runners = profiled_runners(export, args.batch)
        for runner, feeds in runners.values():
            runner.execute(feeds)
            runner.reset_profile()
        for _ in range(args.rounds):
            for runner, feeds in runners.values():
                for _ in range(args.iters):
                    runner.execute(feeds)
        runs = args.rounds * args.iters
        winograd = {e["node"] for e in runners["fp32"][0].profile() if e["op"] == "NchwcWinogradConv"}
        by_kind = {precision: collections.Counter() for precision in PRECISIONS}
        layers = {precision: {} for precision in PRECISIONS}
        steps = {precision: {} for precision in PRECISIONS}
        for precision, (runner, _) in runners.items():
            for e in runner.profile():
                steps[precision][e["node"]] = (e["op"], e["total_us"] / runs)
                if "Conv" not in e["op"]:
                    continue
                kind = "3x3 (fp32 Winograd)" if e["node"] in winograd else kinds.get(e["node"], "?")
                ms = e["total_us"] / runs / 1e3
                by_kind[precision][kind] += ms
                layers[precision][e["node"]] = (kind, ms)
        print(f"{model} batch {args.batch}: conv ms per run ({runs} runs of each, alternating blocks of {args.iters})")
        print(f"  {'kind':22s} {'fp32':>8s} {'fp16':>8s} {'fp16/fp32':>9s}")
        rows = sorted(set(by_kind["fp32"]) | set(by_kind["fp16"]), key=lambda k: -by_kind["fp32"][k])
        for kind in rows + ["all"]:
            f32 = sum(by_kind["fp32"].values()) if kind == "all" else by_kind["fp32"][kind]
            f16 = sum(by_kind["fp16"].values()) if kind == "all" else by_kind["fp16"][kind]
            print(f"  {kind:22s} {f32:8.2f} {f16:8.2f} {f16 / max(f32, 1e-9):9.2f}")
        if args.layers:
            for node, (kind, f32) in sorted(layers["fp32"].items(), key=lambda kv: -kv[1][1])[:25]:
                f16 = layers["fp16"].get(node, (kind, float("nan")))[1]
                print(f"    {node[:40]:40s} {kind:20s} {f32:7.3f} {f16:7.3f} {f16 / f32:5.2f}")
        if args.excess:
            print_excess(steps, kinds, args.excess)


if __name__ == "__main__":
    main()
