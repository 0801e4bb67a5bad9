"""The channels-last NCHWc reorders around ConvNeXt's LayerNorm + Dense blocks: one
`ToNchwc(channels_last=1) -> FromNchwc(channels_last=1)` model per shape (ConvNeXtTiny's four
stages at batch 8, and its first at batch 1), checked to round-trip, then profiled: µs per call
of each step and the GB/s that is (bytes read + written).

    PYTHONPATH=$PWD .venv/bin/python benchmarks/bench_nchwc_reorders.py [--runs 200] [--precision fp32 fp16]
"""
import argparse
import os
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compare_popefs import random_feeds  # noqa: E402
from compiler.compiler import compile_converted  # noqa: E402
from compiler.onnx_graph.internal_ops import DOMAIN, VERSION  # noqa: E402
from compiler.options import CompilerOptions  # noqa: E402
from profile_model import profiled_runs  # noqa: E402
from tf_popef_op.runtime import ModelRunner, RuntimeConfig  # noqa: E402

SHAPES = [(8, 56, 96), (8, 28, 192), (8, 14, 384), (8, 7, 768), (1, 56, 96)]  # (N, H = W, C)
TYPES = {"fp32": TensorProto.FLOAT, "fp16": TensorProto.FLOAT16}


def round_trip_model(n, hw, c, elem_type):
    x = helper.make_tensor_value_info("x", elem_type, [n, hw, hw, c])
    z = helper.make_tensor_value_info("z", elem_type, [n, hw, hw, c])
    nodes = [helper.make_node("ToNchwc", ["x"], ["y"], domain=DOMAIN, channels_last=1),
             helper.make_node("FromNchwc", ["y"], ["z"], domain=DOMAIN, channels_last=1)]
    return helper.make_model(helper.make_graph(nodes, "reorders", [x], [z]),
                             opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, VERSION)])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--precision", nargs="+", default=["fp32", "fp16"], choices=sorted(TYPES))
    a = p.parse_args()
    for precision in a.precision:
        elem_type = TYPES[precision]
        for n, hw, c in SHAPES:
            executable = compile_converted(round_trip_model(n, hw, c, elem_type), CompilerOptions(batch_size=n))
            runner = ModelRunner(executable, RuntimeConfig(profile=True))
            feed = random_feeds(runner)
            (out,) = runner.get_execute_outputs()
            outs = {out.name: np.zeros(out.shape, out.numpy_data_type())}
            runner.execute(feed, outs)
            x = next(iter(feed.values()))
            if not np.array_equal(outs[out.name], x):
                raise SystemExit(f"{precision} [{n}, {hw}, {hw}, {c}]: the round trip changed the tensor")
            profiled_runs(runner, feed, a.runs, warmup=3)
            mb = x.nbytes / 1e6
            steps = ", ".join(f"{e['op']} {e['mean_us']:.0f} µs ({2 * mb / e['mean_us'] * 1e3:.0f} GB/s)"
                              for e in runner.profile())
            print(f"{precision} [{n}, {hw}, {hw}, {c}] {mb:.1f} MB: {steps}")


if __name__ == "__main__":
    main()
