"""Per-op time of the blocked pools, spatial means and Concat on the CNN families' shapes.

A model per shape, Conv 1x1 -> {AveragePool 3x3/1 pads 1 (InceptionV3's pool branches),
MaxPool 3x3/2 (its reductions), ReduceMean over H, W (squeeze-and-excite), Concat of the conv
output with itself (DenseNet's dense blocks)}, compiled with the default options, so the pools
are NchwcAveragePool / NchwcMaxPool and the mean and Concat run on the blocked tensor. Runs it
with the runtime's profiler on preallocated outputs and prints, per op, the best over `--blocks`
blocks of `--runs` runs of the mean µs per run (the best block is the least disturbed on a
shared machine). Run it once per checkout, alternating, to compare two builds:

    for i in 1 2; do for c in OLD_CHECKOUT NEW_CHECKOUT; do (cd $c && TF_POPEF_NUM_THREADS=1 PYTHONPATH=$PWD \
        .venv/bin/python <this file>); done; done
"""
import argparse

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from compiler import Compiler
from compiler.converter import Converter
from tf_popef_op.runtime import ModelRunner, RuntimeConfig

SHAPES = [(1, 288, 35, 35), (1, 64, 147, 147), (1, 1152, 7, 7), (1, 144, 56, 56), (8, 288, 35, 35)]
OPS = ("NchwcAveragePool", "NchwcMaxPool", "ReduceMean", "Concat")


def model(n, c, h, w):
    f = TensorProto.FLOAT
    weight = numpy_helper.from_array(np.random.default_rng(0).random((c, c, 1, 1), np.float32) / c, "W")
    nodes = [helper.make_node("Conv", ["x", "W"], ["a"], kernel_shape=[1, 1]),
             helper.make_node("AveragePool", ["a"], ["avg"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("MaxPool", ["a"], ["max"], kernel_shape=[3, 3], strides=[2, 2]),
             helper.make_node("ReduceMean", ["a"], ["mean"], axes=[2, 3], keepdims=1),
             helper.make_node("Concat", ["a", "a"], ["cat"], axis=1)]
    outputs = [("avg", [n, c, h, w]), ("max", [n, c, (h - 3) // 2 + 1, (w - 3) // 2 + 1]), ("mean", [n, c, 1, 1]),
               ("cat", [n, 2 * c, h, w])]
    graph = helper.make_graph(nodes, "pools", [helper.make_tensor_value_info("x", f, [n, c, h, w])],
                              [helper.make_tensor_value_info(name, f, s) for name, s in outputs], [weight])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--blocks", type=int, default=5)
    args = parser.parse_args()
    print("shape".ljust(22) + "".join(op.rjust(18) for op in OPS) + "   (µs per run)")
    for shape in SHAPES:
        runner = ModelRunner(Compiler.compile(Converter().convert(model(*shape))), RuntimeConfig(profile=True))
        feed = {"x": np.random.default_rng(1).random(shape, np.float32)}
        outs = {o.name: np.zeros(o.shape, o.numpy_data_type()) for o in runner.get_execute_outputs()}
        best = {}
        for _ in range(args.blocks):
            runner.execute(feed, outs)
            runner.reset_profile()
            for _ in range(args.runs):
                runner.execute(feed, outs)
            for entry in runner.profile():
                best[entry["op"]] = min(best.get(entry["op"], float("inf")), entry["total_us"] / args.runs)
        print(str(shape).ljust(22) + "".join(f"{best.get(op, float('nan')):18.1f}" for op in OPS))


if __name__ == "__main__":
    main()
