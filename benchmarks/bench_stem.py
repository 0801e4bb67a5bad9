"""The CNN stems alone: NHWC input -> Transpose -> Conv (3 input channels) -> activation (then a
GlobalAveragePool, so the output is small and its copy negligible), as the
tf2onnx exports of EfficientNetB0, MobileNetV2, ResNet50 and InceptionV3 begin, compiled twice by
this checkout: with the input Transpose folded into the stem (fold_input_transpose_into_nchwc_conv,
the default pipeline) and without that pass (the Transpose step, then the plain-input NchwcConv).
Both PopEFs and onnxruntime (its default optimization level, same thread count) on the same model
are timed interleaved (whole execute, µs, median), then ours are profiled in alternating blocks:
the Transpose and NchwcConv steps' µs per run (median over --rounds). Outputs are checked against
onnxruntime first.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_stem.py [--stems efficientnet_b0 ...]
        [--batch 1 8] [--precision fp32 fp16] [--iters 60] [--rounds 5] [--runs 20]
"""
import argparse
import collections
import os
import statistics
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compiler.compiler import compile_converted  # noqa: E402
from compiler.converter import Converter  # noqa: E402
from compiler.kernel_fusion import pipeline  # noqa: E402
from compiler.options import CompilerOptions  # noqa: E402
from interleaved_timing import interleaved  # noqa: E402
from onnxruntime_peer import cpu_session  # noqa: E402
from tf_popef_op import runtime  # noqa: E402
from tf_popef_op.runtime import ModelRunner, RuntimeConfig  # noqa: E402

FOLD = "fold_input_transpose_into_nchwc_conv"
# name: (size, M, kernel, stride, pads [top, left, bottom, right], activation)
STEMS = {
    "efficientnet_b0": (224, 32, 3, 2, [0, 0, 1, 1], "Swish"),
    "mobilenet_v2": (224, 32, 3, 2, [0, 0, 1, 1], "Relu6"),
    "resnet50": (224, 64, 7, 2, [3, 3, 3, 3], "Relu"),
    "inception_v3": (299, 32, 3, 2, [0, 0, 0, 0], "Relu"),
}


def stem_model(name: str, batch: int):
    size, m, k, stride, pads, activation = STEMS[name]
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal((m, 3, k, k)) / np.sqrt(3 * k * k)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.standard_normal(m).astype(np.float32), "B")]
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[0, 3, 1, 2]),
             helper.make_node("Conv", ["t", "W", "B"], ["c"], kernel_shape=[k, k], strides=[stride, stride],
                              pads=pads, name="stem")]
    if activation == "Swish":
        nodes += [helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["c", "s"], ["a"])]
    elif activation == "Relu6":
        inits += [numpy_helper.from_array(np.float32(0), "lo"), numpy_helper.from_array(np.float32(6), "hi")]
        nodes.append(helper.make_node("Clip", ["c", "lo", "hi"], ["a"]))
    else:
        nodes.append(helper.make_node("Relu", ["c"], ["a"]))
    nodes.append(helper.make_node("GlobalAveragePool", ["a"], ["y"]))
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, size, size, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, m, 1, 1])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def compile_stem(model, batch: int, precision: str, fold: bool):
    converted = Converter(batch_size=batch, precision=precision).convert(model)
    names = pipeline.KERNEL_FUSION_PIPELINE
    at = names.index(FOLD)
    if not fold:
        names.remove(FOLD)
    try:
        return compile_converted(converted, CompilerOptions(batch_size=batch))
    finally:
        if not fold:
            names.insert(at, FOLD)


def step_us(runner, feeds, runs: int) -> dict:
    """{op: µs per run} over `runs` profiled runs."""
    for _ in range(2):
        runner.execute(feeds)
    runner.reset_profile()
    for _ in range(runs):
        runner.execute(feeds)
    per = collections.Counter()
    for e in runner.profile():
        per[e["op"]] += e["total_us"] / runs
    return per


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stems", nargs="+", default=list(STEMS), choices=list(STEMS))
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--precision", nargs="+", default=["fp32", "fp16"])
    ap.add_argument("--iters", type=int, default=60, help="interleaved executes of each contender")
    ap.add_argument("--rounds", type=int, default=5, help="alternating profiled blocks per PopEF")
    ap.add_argument("--runs", type=int, default=20, help="profiled runs per block")
    a = ap.parse_args()
    threads = runtime.num_threads()
    print(f"{threads} intra-op threads, load average {os.getloadavg()[0]:.2f}")
    print("| stem | b | precision | ORT µs | ours, Transpose + conv µs | ours, folded µs | folded / Transpose "
          "| steps: Transpose + NchwcConv → folded NchwcConv µs |")
    print("|---|---:|---|---:|---:|---:|---:|---|")
    for name in a.stems:
        for batch in a.batch:
            model = stem_model(name, batch)
            x = np.random.default_rng(1).standard_normal((batch, *STEMS[name][:1] * 2, 3)).astype(np.float32)
            session = cpu_session(model, threads)
            want = session.run(None, {"x": x})[0]
            for precision in a.precision:
                feeds = {"x": x.astype(np.float16) if precision == "fp16" else x}
                tol = 2e-2 if precision == "fp16" else 1e-4
                runners = {}
                for label, fold in (("transpose", False), ("folded", True)):
                    runner = ModelRunner(compile_stem(model, batch, precision, fold), RuntimeConfig())
                    got = runner.execute(feeds)["y"].astype(np.float32)
                    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max())))
                    runners[label] = runner
                contenders = {"ort": lambda: session.run(None, {"x": x}),
                              "transpose": lambda: runners["transpose"].execute(feeds),
                              "folded": lambda: runners["folded"].execute(feeds)}
                times = interleaved(contenders, warmup=3, min_iters=a.iters, max_iters=a.iters, budget_s=0)
                med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
                profiled = {label: ModelRunner(compile_stem(model, batch, precision, label == "folded"),
                                               RuntimeConfig(profile=True)) for label in ("transpose", "folded")}
                steps = {label: collections.defaultdict(list) for label in profiled}
                for r in range(a.rounds):
                    for label in (("transpose", "folded") if r % 2 == 0 else ("folded", "transpose")):
                        for op, us in step_us(profiled[label], feeds, a.runs).items():
                            steps[label][op].append(us)
                st = {label: {op: statistics.median(v) for op, v in ops.items()} for label, ops in steps.items()}
                before = st["transpose"].get("Transpose", 0.0) + st["transpose"].get("NchwcConv", 0.0)
                print(f"| {name} | {batch} | {precision} | {med['ort']:.0f} | {med['transpose']:.0f} | "
                      f"{med['folded']:.0f} | {med['folded'] / med['transpose']:.2f} | "
                      f"{st['transpose'].get('Transpose', 0.0):.0f} + {st['transpose'].get('NchwcConv', 0.0):.0f} = "
                      f"{before:.0f} → {st['folded'].get('NchwcConv', 0.0):.0f} |", flush=True)
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
