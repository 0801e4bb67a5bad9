"""The squeeze-and-excite mean alone: ReduceMean over H and W of a blocked [N, C/8, H, W, 8]
tensor (EfficientNetB0's shapes), its float32 and float16 step times in one process.

Each shape is an ONNX model Conv 1x1 -> Relu -> ReduceMean(axes 2, 3), compiled by this checkout
(the convolution makes the blocked layout, as in the network) into --out; the fp32 and fp16
PopEFs are profiled in alternating blocks of runs, and each prints the median over rounds of the
ReduceMean step's µs per run. Run it once per checkout (PYTHONPATH=<checkout>, which comes
first) to compare builds; the fp16/fp32 column is taken inside one process.

    .venv/bin/python benchmarks/blocked_mean_steps.py [--out /tmp/blocked_means] [--rounds 5]
"""
import argparse
import os
import statistics
import sys

import numpy as np

# After $PYTHONPATH: another checkout's runtime and compiler can run this script.
sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (channels, height = width): EfficientNetB0's squeeze-and-excite inputs at 224.
SHAPES = ((32, 112), (96, 56), (144, 56), (240, 28), (480, 14), (1152, 7))
PRECISIONS = ("fp32", "fp16")


def _popef(out: str, c: int, s: int, batch: int, precision: str) -> str:
    return os.path.join(out, f"mean-{c}-{s}-b{batch}-{precision}.popef")


def _compile(out: str, batches) -> None:
    from onnx import TensorProto, helper, numpy_helper
    from benchmarks.compile_stages import compile_with_stages
    for c, s in SHAPES:
        w = np.random.default_rng(0).standard_normal((c, c, 1, 1)).astype(np.float32) * 0.1
        graph = helper.make_graph(
            [helper.make_node("Conv", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("ReduceMean", ["r"], ["y"], axes=[2, 3], keepdims=1)], "mean",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, s, s])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 1, 1])], [numpy_helper.from_array(w, "w")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        for batch in batches:
            for precision in PRECISIONS:
                compile_with_stages(model, batch, precision)[0].save(_popef(out, c, s, batch, precision))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="/tmp/blocked_means")
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--runs", type=int, default=20, help="profiled runs per block (a quarter at batch 8)")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    _compile(args.out, args.batch)
    from tf_popef_op.runtime import ModelRunner, RuntimeConfig
    print(f"{'shape':22s} {'fp32 us':>9s} {'fp16 us':>9s} {'fp16/fp32':>9s}")
    for c, s in SHAPES:
        for batch in args.batch:
            runners = {}
            for precision in PRECISIONS:
                runner = ModelRunner(_popef(args.out, c, s, batch, precision), RuntimeConfig(profile=True))
                (anchor,) = runner.get_execute_inputs()
                x = np.random.default_rng(0).standard_normal(anchor.shape).astype(anchor.numpy_data_type())
                runners[precision] = (runner, {anchor.name: x})
            runs = args.runs if batch == 1 else max(2, args.runs // 4)
            us = {precision: [] for precision in PRECISIONS}
            for _ in range(args.rounds):
                for precision, (runner, feeds) in runners.items():
                    runner.execute(feeds)
                    runner.reset_profile()
                    for _ in range(runs):
                        runner.execute(feeds)
                    us[precision].append(sum(e["total_us"] for e in runner.profile() if e["op"] == "ReduceMean") / runs)
            f32, f16 = (statistics.median(us[precision]) for precision in PRECISIONS)
            print(f"{f'[{batch}, {c // 8}, {s}, {s}, 8]':22s} {f32:9.1f} {f16:9.1f} {f16 / f32:9.2f}")
            for runner, _ in runners.values():
                runner.close()


if __name__ == "__main__":
    main()
