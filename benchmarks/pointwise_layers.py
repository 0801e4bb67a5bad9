"""ResNet50's 1x1 convolutions one layer at a time: our NchwcConv step against onnxruntime's node.

Each layer is a one-layer ONNX model as ResNet50 has it: Conv + bias, then the residual Add
(a second input of Y's shape, "+sum") and Relu, or Relu alone. Ours is compiled by this
checkout's compiler (benchmarks/compile_stages.py, so fp16 is the converter's fp16 model) and
run with the runtime's profiler; the time is the NchwcConv step's mean per run (the layout
reorders around it are left out). onnxruntime runs the same fp32 model (ORT_ENABLE_ALL, its
NCHWc convolution with the Add and Relu fused) with its profiler; the time is its Conv node's
median (reorders left out). Both at the same intra-op thread count, TF_POPEF_NUM_THREADS (set it
before starting: one process per count). Rounds alternate ours and onnxruntime's blocks; the
medians over rounds are printed, with GFLOP/s.

    TF_POPEF_NUM_THREADS=2 .venv/bin/python benchmarks/pointwise_layers.py [--batch 1 8]
        [--layers 64-256 ...] [--precision fp32 fp16] [--rounds 3] [--iters 20] [--no-ort]
        [--json out.json]

To A/B two checkouts, run the script from each (PYTHONPATH=<checkout>) alternately: the
compiler and runtime are then both the checkout's.
"""
import argparse
import json
import os
import statistics
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

# name: (C, H=W, M, residual Sum)
LAYERS = {
    "64-256": (64, 56, 256, True),
    "256-64": (256, 56, 64, False),
    "128-512": (128, 28, 512, True),
    "512-128": (512, 28, 128, False),
    "256-1024": (256, 14, 1024, True),
    "1024-256": (1024, 14, 256, False),
    "512-2048": (512, 7, 2048, True),
    "2048-512": (2048, 7, 512, False),
}


def layer_model(c, hw, m, with_sum, batch):
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal((m, c, 1, 1)) / np.sqrt(c)).astype(np.float32), "W"),
             numpy_helper.from_array((rng.standard_normal(m) * 0.1).astype(np.float32), "B")]
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [batch, c, hw, hw])]
    nodes = [helper.make_node("Conv", ["X", "W", "B"], ["C"], kernel_shape=[1, 1], name="conv")]
    last = "C"
    if with_sum:
        inputs.append(helper.make_tensor_value_info("R", TensorProto.FLOAT, [batch, m, hw, hw]))
        nodes.append(helper.make_node("Add", ["C", "R"], ["S"], name="add"))
        last = "S"
    nodes.append(helper.make_node("Relu", [last], ["Y"], name="relu"))
    graph = helper.make_graph(nodes, "pointwise", inputs,
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [batch, m, hw, hw])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, 2.0 * batch * m * hw * hw * c


def ours_step_us(runner, feeds, iters):
    from profile_model import profiled_runs
    profiled_runs(runner, feeds, iters, warmup=2)
    convs = [e for e in runner.profile() if e["op"] == "NchwcConv"]
    if len(convs) != 1:
        raise RuntimeError(f"expected one NchwcConv step, got {[(e['op'], e['node']) for e in runner.profile()]}")
    return convs[0]["total_us"] / iters


def ort_node_us(model, feeds, threads, iters):
    from compare_layers import profile_onnxruntime
    times = profile_onnxruntime(model, feeds, threads, "all", iters, warmup=2)
    convs = [t["us"] for t in times.values() if "Conv" in t["op"]]
    if len(convs) != 1:
        raise RuntimeError(f"expected one onnxruntime convolution node, got {times}")
    return convs[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", nargs="+", type=int, default=[1, 8])
    ap.add_argument("--layers", nargs="+", default=list(LAYERS), choices=list(LAYERS))
    ap.add_argument("--precision", nargs="+", default=["fp32"], choices=["fp32", "fp16"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--no-ort", action="store_true", help="time ours only")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()

    from compile_stages import compile_with_stages
    from tf_popef_op import runtime
    from tf_popef_op.runtime import ModelRunner, RuntimeConfig

    threads = runtime.num_threads()
    print(f"# threads {threads}, load average {os.getloadavg()[0]:.2f}, {args.rounds} rounds x {args.iters} runs")
    print(f"{'layer':10s} {'batch':>5s} {'prec':>5s} {'ours us':>9s} {'GFLOP/s':>8s} {'ort us':>9s} {'GFLOP/s':>8s} "
          f"{'ratio':>6s}  ours rounds")
    rows = []
    for batch in args.batch:
        for name in args.layers:
            c, hw, m, with_sum = LAYERS[name]
            model, flops = layer_model(c, hw, m, with_sum, batch)
            rng = np.random.default_rng(1)
            feeds32 = {"X": rng.standard_normal((batch, c, hw, hw)).astype(np.float32)}
            if with_sum:
                feeds32["R"] = rng.standard_normal((batch, m, hw, hw)).astype(np.float32)
            for precision in args.precision:
                executable = compile_with_stages(model, batch, precision)[0]
                dtype = np.float16 if precision == "fp16" else np.float32
                feeds = {k: v.astype(dtype) for k, v in feeds32.items()}
                ours, theirs = [], []
                with ModelRunner(executable, RuntimeConfig(profile=True)) as runner:
                    for _ in range(args.rounds):
                        ours.append(ours_step_us(runner, feeds, args.iters))
                        if not args.no_ort and precision == "fp32":
                            theirs.append(ort_node_us(model, feeds32, threads, args.iters))
                a = statistics.median(ours)
                b = statistics.median(theirs) if theirs else float("nan")
                rows.append({"layer": name, "batch": batch, "precision": precision, "threads": threads,
                             "ours_us": a, "ort_us": b, "ours_rounds": ours, "ort_rounds": theirs})
                print(f"{name:10s} {batch:5d} {precision:>5s} {a:9.1f} {flops / a * 1e-3:8.1f} {b:9.1f} "
                      f"{flops / b * 1e-3:8.1f} {a / b:6.2f}  {' '.join(f'{t:.0f}' for t in ours)}", flush=True)
    print(f"# load average {os.getloadavg()[0]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
