"""One PopEF's convolution steps on two builds' runtimes: per layer and per kind of layer, how
much a runtime change moved each step. Each checkout's runtime profiles the same PopEF in its
own process (one extension module per process), the two processes alternating for `--rounds`;
a step's time is the median of its per-round medians over `--runs` profiled runs.

    .venv/bin/python benchmarks/compare_runtime_steps.py OLD_CHECKOUT NEW_CHECKOUT MODEL.popef \
        --onnx MODEL.onnx [--rounds 2] [--runs 15] [--top 14]

The ONNX model (the export the PopEF was compiled from) names each Conv step's kind: depthwise
KxK sN, a 1x1 expand (more outputs than inputs), other 1x1, and the rest by window. Steps keep
their Conv node's name; other steps are left out.
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys

import onnx
from onnx import helper, shape_inference


def _profile(popef: str, runs: int) -> None:
    """In the checkout's process: print {step: median us} as JSON."""
    import numpy as np
    from tf_popef_op.runtime import ModelRunner, RuntimeConfig
    runner = ModelRunner(popef, RuntimeConfig(profile=True))
    rng = np.random.default_rng(0)
    feeds = {i.name: rng.standard_normal(i.shape).astype(i.numpy_data_type()) for i in runner.get_execute_inputs()}
    for _ in range(3):
        runner.execute(feeds)
    per = collections.defaultdict(list)
    for _ in range(runs):
        runner.reset_profile()
        runner.execute(feeds)
        for entry in runner.profile():
            per[entry["node"]].append(entry["total_us"])
    print(json.dumps({node: statistics.median(v) for node, v in per.items()}))


def conv_layers(onnx_path: str):
    """{Conv node name: (kind, description)} from the ONNX model."""
    model = shape_inference.infer_shapes(onnx.load(onnx_path))
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(model.graph.value_info) + list(model.graph.input)}
    weights = {t.name: list(t.dims) for t in model.graph.initializer}
    layers = {}
    for node in model.graph.node:
        if node.op_type != "Conv" or node.input[1] not in weights:
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        m, c, kh, kw = weights[node.input[1]]
        stride, group = attrs.get("strides", [1, 1])[0], attrs.get("group", 1)
        size = shapes.get(node.input[0], [0, 0, 0])[2]
        if group > 1:
            kind = f"depthwise {kh}x{kw} s{stride}"
            layers[node.name] = (kind, f"{kind} {m}ch @{size}")
        elif kh == kw == 1:
            layers[node.name] = ("1x1 expand" if m > c else "1x1 other", f"1x1 {c}->{m} @{size}")
        else:
            kind = f"{kh}x{kw} s{stride}"
            layers[node.name] = (kind, f"{kind} {c}->{m} @{size}")
    return layers


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="*", help="OLD_CHECKOUT NEW_CHECKOUT MODEL.popef")
    parser.add_argument("--onnx", help="the ONNX export the PopEF was compiled from")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--top", type=int, default=14, help="layers listed (the slowest on OLD)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _profile(args.worker, args.runs)
        return
    if len(args.paths) != 3 or not args.onnx:
        parser.error("give OLD_CHECKOUT NEW_CHECKOUT MODEL.popef and --onnx")
    checkouts, popef = args.paths[:2], os.path.abspath(args.paths[2])
    rounds = {c: [] for c in checkouts}
    for r in range(args.rounds):
        for checkout in checkouts[::1 if r % 2 == 0 else -1]:  # first place swaps: see compare_builds.py
            command = [sys.executable, os.path.abspath(__file__), "--worker", popef, "--runs", str(args.runs)]
            out = subprocess.run(command, cwd=checkout, env=dict(os.environ, PYTHONPATH=checkout),
                                 capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit(f"{checkout}: profiling failed:\n{out.stderr[-3000:]}")
            rounds[checkout].append(json.loads(out.stdout.strip().splitlines()[-1]))
    old, new = ({step: statistics.median(r.get(step, 0.0) for r in rounds[c]) for step in rounds[c][0]}
                for c in checkouts)
    layers = {step: kd for step, kd in conv_layers(args.onnx).items() if step in old and step in new}
    kinds = collections.defaultdict(lambda: [0.0, 0.0])
    for step, (kind, _) in layers.items():
        kinds[kind][0] += old[step]
        kinds[kind][1] += new[step]
    print(f"{os.path.basename(popef)}: old {checkouts[0]}, new {checkouts[1]}, {args.rounds} rounds, "
          f"load average {os.getloadavg()[0]:.1f}\n")
    print("| kind | old us | new us | new/old |\n|---|---:|---:|---:|")
    for kind, (a, b) in sorted(kinds.items(), key=lambda kv: -kv[1][0]):
        print(f"| {kind} | {a:.0f} | {b:.0f} | {b / a:.2f} |")
    a, b = sum(v[0] for v in kinds.values()), sum(v[1] for v in kinds.values())
    print(f"| all convolutions | {a:.0f} | {b:.0f} | {b / a:.2f} |\n")
    print("| layer | old us | new us | new/old |\n|---|---:|---:|---:|")
    for step in sorted(layers, key=lambda s: -old[s])[:args.top]:
        print(f"| {layers[step][1]} | {old[step]:.0f} | {new[step]:.0f} | {new[step] / old[step]:.2f} |")


if __name__ == "__main__":
    main()
