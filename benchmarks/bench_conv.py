"""Convolution layers of ResNet50 and MobileNetV2: ModelRunner vs onnxruntime, interleaved.

Each case is one Conv (+ bias, + Relu or Clip(0, 6) like the networks' layers) at a layer shape
of ResNet50 / MobileNetV2 (224x224 input), batch 1 and 8. The emulator runs it as the compiler
makes it: one FusedConv step (bias and activation in the epilogue); `--no-fusion` compiles
with CompilerOptions(kernel_fusion=False) to time Conv + Relu as separate kernels instead.
Same intra-op thread count for both (TF_POPEF_NUM_THREADS / intra_op_num_threads, default =
cores); samples alternate between the engines (benchmarks/interleaved_timing.py). onnxruntime
runs twice: as configured by default (ORT_ENABLE_ALL, which converts convolutions to its
blocked NCHWc layout) and at ORT_ENABLE_EXTENDED (plain NCHW, im2col/depthwise kernels like
ours): the last two columns.

    .venv/bin/python benchmarks/bench_conv.py [--batch 1 8] [--cases r50_conv1 mb2_dw112 ...]
                                              [--budget 2] [--no-fusion]
"""
import argparse
import os
import sys

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from compiler import Compiler  # noqa: E402
from compiler.options import CompilerOptions  # noqa: E402
from interleaved_timing import interleaved  # noqa: E402
from onnxruntime_peer import cpu_session  # noqa: E402
from tf_popef_op.runtime import ModelRunner, RuntimeConfig  # noqa: E402

# name: (C, H=W, M, kernel, stride, group, activation)  — pads are "same" (k // 2)
CASES = {
    "r50_conv1":      (3, 224, 64, 7, 2, 1, "Relu"),
    "r50_1x1_56":     (64, 56, 256, 1, 1, 1, ""),
    "r50_3x3_56":     (64, 56, 64, 3, 1, 1, "Relu"),
    "r50_1x1_28":     (512, 28, 128, 1, 1, 1, "Relu"),
    "r50_3x3_28":     (128, 28, 128, 3, 1, 1, "Relu"),
    "r50_3x3_14":     (256, 14, 256, 3, 1, 1, "Relu"),
    "r50_3x3_7":      (512, 7, 512, 3, 1, 1, "Relu"),
    "r50_1x1_s2":     (1024, 14, 2048, 1, 2, 1, ""),
    "r50_1x1_s2_56":  (256, 56, 512, 1, 2, 1, ""),
    "r50_1x1_56_down": (256, 56, 64, 1, 1, 1, "Relu"),
    "r50_1x1_14":     (1024, 14, 256, 1, 1, 1, "Relu"),
    "r50_1x1_14_up":  (256, 14, 1024, 1, 1, 1, ""),
    "r50_1x1_7":      (2048, 7, 512, 1, 1, 1, "Relu"),
    "r50_1x1_7_up":   (512, 7, 2048, 1, 1, 1, ""),
    "mb2_conv1":      (3, 224, 32, 3, 2, 1, "Relu6"),
    "mb2_dw112":      (32, 112, 32, 3, 1, 32, "Relu6"),
    "mb2_dw112_s2":   (96, 112, 96, 3, 2, 96, "Relu6"),
    "mb2_dw28":       (192, 28, 192, 3, 1, 192, "Relu6"),
    "mb2_dw14":       (384, 14, 384, 3, 1, 384, "Relu6"),
    "mb2_dw7":        (960, 7, 960, 3, 1, 960, "Relu6"),
    "mb2_dw56":       (144, 56, 144, 3, 1, 144, "Relu6"),
    "mb2_dw56_s2":    (144, 56, 144, 3, 2, 144, "Relu6"),
    "mb2_dw28_s2":    (192, 28, 192, 3, 2, 192, "Relu6"),
    "mb2_dw14_576":   (576, 14, 576, 3, 1, 576, "Relu6"),
    "mb2_dw14_s2":    (576, 14, 576, 3, 2, 576, "Relu6"),
    "mb2_pw_expand":  (24, 56, 144, 1, 1, 1, "Relu6"),
    "mb2_pw_project": (144, 56, 24, 1, 1, 1, ""),
    "mb2_pw_112":     (16, 112, 96, 1, 1, 1, "Relu6"),
    "mb2_pw_28":      (192, 28, 32, 1, 1, 1, ""),
    "mb2_pw_14":      (384, 14, 64, 1, 1, 1, ""),
    "mb2_pw_7_expand": (160, 7, 960, 1, 1, 1, "Relu6"),
    "mb2_pw_7_project": (960, 7, 160, 1, 1, 1, ""),
    "mb2_pw_last":    (320, 7, 1280, 1, 1, 1, "Relu6"),
}


def conv_model(c, hw, m, k, stride, group, activation, batch):
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((m, c // group, k, k)) * 0.1).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal(m).astype(np.float32), "B")
    out = (hw + 2 * (k // 2) - k) // stride + 1
    p = k // 2
    nodes = [helper.make_node("Conv", ["X", "W", "B"], ["C" if activation else "Y"], pads=[p, p, p, p],
                              strides=[stride, stride], group=group, kernel_shape=[k, k])]
    inits = [w, b]
    if activation == "Relu":
        nodes.append(helper.make_node("Relu", ["C"], ["Y"]))
    elif activation == "Relu6":
        inits += [numpy_helper.from_array(np.float32(0), "lo"), numpy_helper.from_array(np.float32(6), "hi")]
        nodes.append(helper.make_node("Clip", ["C", "lo", "hi"], ["Y"]))
    graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [batch, c, hw, hw])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [batch, m, out, out])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    flops = 2 * batch * m * out * out * (c // group) * k * k
    return model, flops


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", nargs="+", type=int, default=[1, 8])
    p.add_argument("--cases", nargs="+", default=list(CASES))
    p.add_argument("--budget", type=float, default=2.0, help="seconds of timing per case")
    p.add_argument("--no-fusion", action="store_true", help="compile with kernel_fusion=False")
    args = p.parse_args(argv)
    threads = int(os.environ.get("TF_POPEF_NUM_THREADS", os.cpu_count()))
    print(f"threads {threads}; fusion {'off' if args.no_fusion else 'on'}")
    print(f"{'case':16s} {'batch':>5s} {'emulator ms':>11s} {'ort ms':>8s} {'ratio':>6s} {'GFLOP/s':>8s} {'max err':>8s} "
          f"{'ort NCHW ms':>12s} {'ratio':>6s}")
    for batch in args.batch:
        for name in args.cases:
            model, flops = conv_model(*CASES[name], batch)
            x = np.random.default_rng(1).standard_normal([batch, CASES[name][0], CASES[name][1], CASES[name][1]]
                                                         ).astype(np.float32)
            runner = ModelRunner(Compiler.compile(model, options=CompilerOptions(kernel_fusion=not args.no_fusion)),
                                 RuntimeConfig())
            sess = cpu_session(model, threads)
            # Without ORT_ENABLE_ALL's layout transformer onnxruntime keeps NCHW (no NCHWc
            # blocked convolutions): what the blocked layout is worth to it.
            sess_nchw = cpu_session(model, threads, ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED)
            out = np.empty(runner.execute({"X": x})["Y"].shape, np.float32)
            err = float(np.max(np.abs(runner.execute({"X": x})["Y"] - sess.run(None, {"X": x})[0])))
            samples = interleaved({"emulator": lambda: runner.execute({"X": x}, {"Y": out}),
                                   "ort": lambda: sess.run(None, {"X": x}),
                                   "ort_nchw": lambda: sess_nchw.run(None, {"X": x})},
                                  warmup=3, min_iters=5, max_iters=400, budget_s=args.budget)
            ours, theirs, nchw = (float(np.median(samples[k])) for k in ("emulator", "ort", "ort_nchw"))
            print(f"{name:16s} {batch:5d} {ours * 1e3:11.3f} {theirs * 1e3:8.3f} {ours / theirs:6.2f} "
                  f"{flops / ours / 1e9:8.1f} {err:8.1e} {nchw * 1e3:12.3f} {ours / nchw:6.2f}", flush=True)


if __name__ == "__main__":
    main()
