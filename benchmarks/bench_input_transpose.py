"""The NHWC -> NCHW Transpose every image model starts with (tf2onnx exports of Keras CNNs):
one `Transpose(perm=[0, 3, 1, 2])` on [N, H, W, C] compiled alone at each batch and precision,
checked against numpy, then timed as µs per `ModelRunner.execute` (the Python call included):
the median of --reps repetitions of --calls calls.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_input_transpose.py [--size 224] [--channels 3]
        [--batch 1 8] [--precision fp32 fp16]
"""
import argparse
import os
import sys
import time

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compare_popefs import random_feeds  # noqa: E402
from compiler.compiler import compile_converted  # noqa: E402
from compiler.converter import Converter  # noqa: E402
from compiler.options import CompilerOptions  # noqa: E402
from tf_popef_op.runtime import ModelRunner, RuntimeConfig  # noqa: E402


def transpose_model(batch, size, channels):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, size, size, channels])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, channels, size, size])
    graph = helper.make_graph([helper.make_node("Transpose", ["x"], ["y"], perm=[0, 3, 1, 2])], "t", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--channels", type=int, default=3)
    p.add_argument("--batch", type=int, nargs="+", default=[1, 8])
    p.add_argument("--precision", nargs="+", default=["fp32", "fp16"])
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--reps", type=int, default=7)
    a = p.parse_args()
    for precision in a.precision:
        for batch in a.batch:
            converted = Converter(batch_size=batch, precision=precision).convert(
                transpose_model(batch, a.size, a.channels))
            runner = ModelRunner(compile_converted(converted, CompilerOptions(batch_size=batch)), RuntimeConfig())
            feed = random_feeds(runner)
            (out,) = runner.get_execute_outputs()
            outs = {out.name: np.zeros(out.shape, out.numpy_data_type())}
            runner.execute(feed, outs)
            if not np.array_equal(outs[out.name], np.transpose(next(iter(feed.values())), (0, 3, 1, 2))):
                raise SystemExit(f"b{batch} {precision}: the output is not the transpose of the input")
            reps = []
            for _ in range(a.reps):
                t0 = time.perf_counter()
                for _ in range(a.calls):
                    runner.execute(feed, outs)
                reps.append((time.perf_counter() - t0) / a.calls * 1e6)
            print(f"[{batch}, {a.size}, {a.size}, {a.channels}] -> NCHW {precision}: "
                  f"{float(np.median(reps)):.1f} µs per execute")


if __name__ == "__main__":
    main()
