"""FusedElementwise vs the same chain run op by op, and vs onnxruntime, interleaved.

Chains the fusion pass (fuse_elementwise_chain) turns into one FusedElementwise, at an
activation size of bench_models.py's networks (BERT's FFN, batch 8: [8, 128, 1024] floats):

  swish_bias   x·σ(x)·0.5 + b[n]                 (4 ops; b per last axis)
  hardswish    x·clip(x/6 + 0.5, 0, 1)           (4 ops, as tf2onnx writes Keras' hard_swish)
  residual     relu(x + r)·s[n] − 1              (4 ops, two run-time inputs)

The emulator compiles each model twice (CompilerOptions(kernel_fusion=False): one kernel per
op; default: one FusedElementwise); onnxruntime runs the unfused ONNX with its own graph
optimizations. Same thread count for both; samples alternate with a short pause before each.

    .venv/bin/python benchmarks/bench_elementwise_chain.py [--iters 200] [--shape 8 128 1024]
"""
import argparse
import os
import statistics
import sys
import time

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [_REPO, os.path.join(_REPO, "benchmarks")]

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from compiler import Compiler  # noqa: E402
from compiler.options import CompilerOptions  # noqa: E402
from onnxruntime_peer import cpu_session  # noqa: E402
from tf_popef_op import runtime  # noqa: E402
from tf_popef_op.runtime import ModelRunner  # noqa: E402


def chain(name, shape):
    n, f = helper.make_node, TensorProto.FLOAT
    rng = np.random.default_rng(0)
    row = lambda: rng.standard_normal(shape[-1]).astype(np.float32)  # noqa: E731
    inputs = [("X", shape)]
    if name == "swish_bias":
        nodes = [n("Sigmoid", ["X"], ["s"]), n("Mul", ["X", "s"], ["m"]), n("Mul", ["m", "half"], ["h"]),
                 n("Add", ["h", "b"], ["Y"])]
        inits = {"half": np.float32(0.5), "b": row()}
    elif name == "hardswish":
        nodes = [n("Div", ["X", "six"], ["d"]), n("Add", ["d", "half"], ["a"]), n("Clip", ["a", "zero", "one"], ["c"]),
                 n("Mul", ["X", "c"], ["Y"])]
        inits = {"six": np.float32(6.0), "half": np.float32(0.5), "zero": np.float32(0.0), "one": np.float32(1.0)}
    else:
        nodes = [n("Add", ["X", "R"], ["a"]), n("Relu", ["a"], ["r"]), n("Mul", ["r", "s"], ["m"]),
                 n("Sub", ["m", "one"], ["Y"])]
        inits = {"s": row(), "one": np.float32(1.0)}
        inputs.append(("R", shape))
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info(k, f, s) for k, s in inputs],
                              [helper.make_tensor_value_info("Y", f, shape)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), [k for k, _ in inputs]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--shape", nargs="+", type=int, default=[8, 128, 1024])
    args = p.parse_args(argv)
    threads = runtime.num_threads()
    print(f"{threads} threads, shape {args.shape}")
    print("| chain | op by op µs | FusedElementwise µs | onnxruntime µs | fused / op by op | fused / onnxruntime |")
    print("|---|---:|---:|---:|---:|---:|")
    rng = np.random.default_rng(1)
    for name in ("swish_bias", "hardswish", "residual"):
        model, names = chain(name, list(args.shape))
        feeds = {k: rng.standard_normal(args.shape).astype(np.float32) for k in names}
        out = {"Y": np.zeros(args.shape, np.float32)}
        unfused = ModelRunner(Compiler.compile(model, options=CompilerOptions(kernel_fusion=False)))
        fused = ModelRunner(Compiler.compile(model))
        sess = cpu_session(model, threads)
        want = sess.run(None, feeds)[0]
        for r in (unfused, fused):
            np.testing.assert_allclose(r.execute(feeds)["Y"], want, rtol=1e-5, atol=1e-5)
        calls = {"unfused": lambda: unfused.execute(feeds, out), "fused": lambda: fused.execute(feeds, out),
                 "ort": lambda: sess.run(None, feeds)}
        times = {k: [] for k in calls}
        for i in range(args.iters + 3):
            for k, call in (list(calls.items()) if i % 2 else list(calls.items())[::-1]):
                time.sleep(0.002)
                t = time.perf_counter()
                call()
                if i >= 3:
                    times[k].append(time.perf_counter() - t)
        med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
        print(f"| {name} | {med['unfused']:.0f} | {med['fused']:.0f} | {med['ort']:.0f} | "
              f"{med['fused'] / med['unfused']:.2f} | {med['fused'] / med['ort']:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
