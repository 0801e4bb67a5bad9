"""Fused inverted-residual blocks (NchwcInvertedResidual) against the three NchwcConv steps they
replace, block by block through MobileNetV2 224 (the cached tf2onnx export of bench_models.py):
the data for CompilerOptions.inverted_residual="auto"'s rule (to_inverted_residual.should_fuse).
With --model efficientnet_b0, the fused expand -> depthwise pairs (no project stage) against
their two steps (to_inverted_residual.should_fuse_pair).

The model is compiled twice per batch and precision, inverted_residual="off" and "all"; the two
runners alternate in blocks of --runs profiled executions for --rounds rounds. Per block: the
profiled time of its three steps (off) and of the fused step (all), median over rounds; and the
whole model's median execute time under each policy.

    .venv/bin/python benchmarks/bench_inverted_residual.py [--model mobilenet_v2] [--batch 1 8] \
        [--precision fp32 fp16] [--rounds 5] [--runs 10]
"""
import argparse
import glob
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from compiler import Compiler  # noqa: E402
from compiler.converter import Converter  # noqa: E402
from compiler.kernel_fusion import run_kernel_fusions  # noqa: E402
from compiler.onnx_graph.graph_edit import producers  # noqa: E402
from compiler.onnx_graph.type_inference import infer_types  # noqa: E402
from compiler.options import CompilerOptions  # noqa: E402
from tf_popef_op.runtime import ModelRunner, RuntimeConfig  # noqa: E402

CACHE = os.path.join(ROOT, "benchmarks", ".cache")
POLICIES = ("off", "all")


def blocks_of(converted, model_name):
    """{fused node name: (description, names of its three (two) steps in the "off" graph)}."""
    off, fused = (run_kernel_fusions(converted, model_name, inverted_residual=p) for p in POLICIES)
    made, types, off_types = producers(off.graph), infer_types(fused).types, infer_types(off).types
    by_name = {n.name: n for n in off.graph.node}
    blocks = {}
    for node in fused.graph.node:
        if node.op_type != "NchwcInvertedResidual":
            continue
        pair = len(node.input) == 5  # expand -> depthwise only: the node keeps the depthwise's name
        project = None if pair else by_name[node.name]
        depthwise = by_name[node.name] if pair else made[project.input[0]]
        expand = made[depthwise.input[0]]
        x, y = types[node.input[0]].shape, types[node.output[0]].shape
        mid = off_types[expand.output[0]].shape[1] * 8
        stride = next(a.ints[0] for a in node.attribute if a.name == "strides")
        k = next(a.ints[0] for a in node.attribute if a.name == "kernel_shape")
        residual = next(a.i for a in node.attribute if a.name == "residual")
        what = (f"{x[2]}x{x[3]} {x[1] * 8}->{mid} dw{k}x{k} s{stride}" if pair else
                f"{x[2]}x{x[3]} {x[1] * 8}->{mid}->{y[1] * 8} s{stride}{' +X' if residual else ''}")
        blocks[node.name] = (what, (expand.name, depthwise.name) if pair else (expand.name, depthwise.name, project.name))
    return blocks


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="mobilenet_v2", help="a bench_models.py name with a cached export")
    p.add_argument("--batch", nargs="+", type=int, default=[1, 8])
    p.add_argument("--precision", nargs="+", default=["fp32", "fp16"])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--runs", type=int, default=10, help="profiled executions per block of one policy")
    args = p.parse_args()
    import onnx
    exports = sorted(glob.glob(os.path.join(CACHE, f"{args.model}-*.onnx")))
    if not exports:
        raise SystemExit(f"no {args.model} export in {CACHE}: run `bench_models.py --parts compile` first")
    model = onnx.load(exports[0])
    threads = int(os.environ.get("TF_POPEF_NUM_THREADS", os.cpu_count()))
    print(f"threads {threads}; load average {os.getloadavg()[0]:.1f}; {args.rounds} rounds of {args.runs} runs")
    for precision in args.precision:
        for batch in args.batch:
            converted = Converter(batch_size=batch, precision=precision).convert(model)
            blocks = blocks_of(converted, args.model)
            runners = {pol: ModelRunner(Compiler.compile(converted, options=CompilerOptions(
                batch_size=batch, inverted_residual=pol)), RuntimeConfig(profile=True)) for pol in POLICIES}
            anchor = runners["off"].get_execute_inputs()[0]
            feed = {anchor.name: np.random.default_rng(0).standard_normal(anchor.shape).astype(
                anchor.numpy_data_type())}
            step_ms = {pol: [] for pol in POLICIES}  # per round: {node: ms per execute}
            model_ms = {pol: [] for pol in POLICIES}
            for runner in runners.values():
                for _ in range(2):
                    runner.execute(feed)
            for _ in range(args.rounds):
                for pol, runner in runners.items():
                    runner.reset_profile()
                    seconds = []
                    for _ in range(args.runs):
                        start = time.perf_counter()
                        runner.execute(feed)
                        seconds.append(time.perf_counter() - start)
                    model_ms[pol].append(float(np.median(seconds)) * 1e3)
                    step_ms[pol].append({e["node"]: e["total_us"] / args.runs / 1e3 for e in runner.profile()})
            print(f"\n{precision} batch {batch}: whole model off {np.median(model_ms['off']):.2f} ms, "
                  f"all {np.median(model_ms['all']):.2f} ms "
                  f"({np.median(model_ms['all']) / np.median(model_ms['off']):.2f}x); "
                  f"load average {os.getloadavg()[0]:.1f}")
            print("| block | shape | three steps ms | fused ms | fused/three |")
            print("|---|---|---:|---:|---:|")
            for name, (what, steps) in blocks.items():
                three = float(np.median([sum(r.get(s, 0.0) for s in steps) for r in step_ms["off"]]))
                one = float(np.median([r.get(name, 0.0) for r in step_ms["all"]]))
                print(f"| {name} | {what} | {three:.3f} | {one:.3f} | {one / three:.2f} |", flush=True)
            three = sum(float(np.median([sum(r.get(s, 0.0) for s in steps) for r in step_ms["off"]]))
                        for _, steps in blocks.values())
            one = sum(float(np.median([r.get(name, 0.0) for r in step_ms["all"]])) for name in blocks)
            print(f"| all {len(blocks)} | | {three:.3f} | {one:.3f} | {one / max(three, 1e-9):.2f} |", flush=True)
            for runner in runners.values():
                runner.close()


if __name__ == "__main__":
    main()
