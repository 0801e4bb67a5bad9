"""Single-op kernels: ModelRunner vs onnxruntime, interleaved in the same run.

Each case is a one- or two-node ONNX model at the shapes bench_models.py's networks produce
(BERT-style encoder: batch 8, seq 128, hidden 256, 4 heads, FFN 1024; MobileNetV2 / ResNet50
activations at batch 8). Both engines get the same intra-op thread count (onnxruntime's
intra_op_num_threads; the emulator's pool size comes from TF_POPEF_NUM_THREADS, default =
cores, set it before the run to compare at another count). Samples alternate between the two
engines (who goes first alternates too, with a 3 ms pause before each call so neither runs while
the other's workers still spin) so both see the same machine noise; the ratio of medians is
the number to compare. Each case first checks that both engines agree.

    .venv/bin/python benchmarks/bench_kernels.py [--iters 50] [--cases Softmax Gelu ...]
    TF_POPEF_SIMD=portable .venv/bin/python benchmarks/bench_kernels.py   # without the AVX2 math
"""
import argparse
import os
import platform
import statistics
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from compiler import Compiler  # noqa: E402
from compiler.converter import Converter  # noqa: E402
from tf_popef_op.runtime import ModelRunner, RuntimeConfig  # noqa: E402

from onnxruntime_peer import cpu_session  # noqa: E402

F = TensorProto.FLOAT
GAP_S = 0.003  # pause before each timed call (see time_case)


def _model(nodes, inputs, output_shape, inits=(), opset=17):
    graph = helper.make_graph(
        nodes, "kernel",
        [helper.make_tensor_value_info(name, F, shape) for name, shape in inputs],
        [helper.make_tensor_value_info("Y", F, output_shape)], list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def unary(op, shape, opset=17, **attrs):
    return _model([helper.make_node(op, ["X"], ["Y"], **attrs)], [("X", shape)], shape, opset=opset)


def swish(shape):
    nodes = [helper.make_node("Sigmoid", ["X"], ["S"]), helper.make_node("Mul", ["X", "S"], ["Y"])]
    return _model(nodes, [("X", shape)], shape)


def add_broadcast(shape, bias_shape):
    bias = numpy_helper.from_array(np.random.default_rng(0).standard_normal(bias_shape).astype(np.float32), "B")
    return _model([helper.make_node("Add", ["X", "B"], ["Y"])], [("X", shape)], shape, inits=[bias])


def layer_norm(shape):
    rng = np.random.default_rng(0)
    scale = numpy_helper.from_array(rng.standard_normal(shape[-1:]).astype(np.float32), "S")
    bias = numpy_helper.from_array(rng.standard_normal(shape[-1:]).astype(np.float32), "B")
    node = helper.make_node("LayerNormalization", ["X", "S", "B"], ["Y"], axis=-1, epsilon=1e-5)
    return _model([node], [("X", shape)], shape, inits=[scale, bias])


def pool(op, shape, out_shape, **attrs):
    return _model([helper.make_node(op, ["X"], ["Y"], **attrs)], [("X", shape)], out_shape)


def transpose(shape, perm):
    return _model([helper.make_node("Transpose", ["X"], ["Y"], perm=perm)], [("X", shape)],
                  [shape[p] for p in perm])


BERT_SCORES = [8, 4, 128, 128]
BERT_FFN = [8, 128, 1024]
BERT_HIDDEN = [8, 128, 256]
MOBILENET_ACT = [8, 96, 56, 56]
RESNET_STEM = [8, 64, 112, 112]
RESNET_ACT = [8, 64, 56, 56]
RESNET_LAST = [8, 2048, 7, 7]

CASES = {
    "Softmax": lambda: unary("Softmax", BERT_SCORES, axis=-1),
    "Gelu": lambda: unary("Gelu", BERT_FFN, opset=20),
    "GeluTanh": lambda: unary("Gelu", BERT_FFN, opset=20, approximate="tanh"),
    "Erf": lambda: unary("Erf", BERT_FFN),
    "Tanh": lambda: unary("Tanh", BERT_FFN),
    "Sigmoid": lambda: unary("Sigmoid", MOBILENET_ACT),
    "Swish": lambda: swish(MOBILENET_ACT),
    "Exp": lambda: unary("Exp", BERT_FFN),
    "Relu": lambda: unary("Relu", MOBILENET_ACT),
    "AddBias": lambda: add_broadcast(BERT_FFN, [1024]),
    "AddChannel": lambda: add_broadcast(RESNET_ACT, [1, 64, 1, 1]),
    "LayerNorm": lambda: layer_norm(BERT_HIDDEN),
    "MaxPool": lambda: pool("MaxPool", RESNET_STEM, RESNET_ACT, kernel_shape=[3, 3], strides=[2, 2],
                            pads=[1, 1, 1, 1]),
    "AveragePool": lambda: pool("AveragePool", RESNET_ACT, RESNET_ACT, kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    "GlobalAveragePool": lambda: pool("GlobalAveragePool", RESNET_LAST, [8, 2048, 1, 1]),
    "ReduceMean": lambda: _model([helper.make_node("ReduceMean", ["X"], ["Y"], axes=[-1], keepdims=1)],
                                 [("X", BERT_FFN)], BERT_FFN[:-1] + [1]),
    "Transpose": lambda: transpose([8, 128, 4, 64], [0, 2, 1, 3]),
    "TransposeNHWC": lambda: transpose(RESNET_ACT, [0, 2, 3, 1]),
}


def time_case(model, iters, threads, precision):
    converted = Converter(precision=precision).convert(model)
    runner = ModelRunner(Compiler.compile(converted.SerializeToString(), ["Y"]), RuntimeConfig())
    in_dtype = runner.get_execute_inputs()[0].numpy_data_type()
    sess = cpu_session(model, threads)

    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    out_shape = [d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    feed_rt = {"X": x.astype(in_dtype)}
    out_rt = {"Y": np.zeros(out_shape, in_dtype)}
    for _ in range(5):
        runner.execute(feed_rt, out_rt)
        expected = sess.run(["Y"], {"X": x})[0]
    tol = 1e-4 if precision == "fp32" else 2e-2
    np.testing.assert_allclose(out_rt["Y"].astype(np.float32), expected, rtol=tol, atol=tol)
    # Alternate which engine goes first, with a short pause before each call: both runtimes'
    # intra-op workers spin for a while after a call and would otherwise steal the other's cores.
    t_rt, t_ort = [], []
    for i in range(iters):
        order = [("rt", lambda: runner.execute(feed_rt, out_rt)), ("ort", lambda: sess.run(["Y"], {"X": x}))]
        for name, call in (order if i % 2 == 0 else order[::-1]):
            time.sleep(GAP_S)
            t0 = time.perf_counter()
            call()
            (t_rt if name == "rt" else t_ort).append(time.perf_counter() - t0)
    ms = lambda v: v * 1e3  # noqa: E731
    return {"rt": ms(statistics.median(t_rt)), "rt_p90": ms(float(np.percentile(t_rt, 90))), "rt_min": ms(min(t_rt)),
            "ort": ms(statistics.median(t_ort)), "ort_min": ms(min(t_ort))}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("TF_POPEF_NUM_THREADS", os.cpu_count())))
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--precision", nargs="+", default=["fp32"], choices=["fp32", "fp16"])
    args = ap.parse_args()
    print(f"# bench_kernels: {args.iters} interleaved iterations, onnxruntime {ort.__version__} "
          f"intra_op_num_threads={args.threads}, TF_POPEF_NUM_THREADS={os.environ.get('TF_POPEF_NUM_THREADS', '(cores)')}, "
          f"TF_POPEF_SIMD={os.environ.get('TF_POPEF_SIMD', '(auto)')}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores")
    print("| case | precision | input shape | ModelRunner median ms | p90 ms | min ms | onnxruntime median ms | "
          "min ms | ratio of medians | ratio of minima |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.cases:
        model = CASES[name]()
        shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
        for precision in args.precision:
            r = time_case(model, args.iters, args.threads, precision)
            print(f"| {name} | {precision} | {shape} | {r['rt']:.3f} | {r['rt_p90']:.3f} | {r['rt_min']:.3f} | "
                  f"{r['ort']:.3f} | {r['ort_min']:.3f} | {r['rt'] / r['ort']:.2f} | {r['rt_min'] / r['ort_min']:.2f} |",
                  flush=True)


if __name__ == "__main__":
    main()
