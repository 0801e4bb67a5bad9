"""ModelRunner vs onnxruntime on an MLP, interleaved in the same run (machines are noisy, so
only the ratio measured side by side is meaningful).

    .venv/bin/python benchmarks/bench_mlp.py [--batch 1 32] [--iters 300] [--threads 2]
"""
import argparse
import os
import platform
import statistics
import time

import numpy as np
import onnxruntime as ort

from compiler import Compiler
from compiler.converter import Converter
from tf_popef_op.runtime import ModelRunner, RuntimeConfig

from mlp_model import build_mlp
from onnxruntime_peer import cpu_session


def percentile(samples, q):
    return float(np.percentile(np.asarray(samples), q))


def bench(batch, sizes, iters, threads, precision):
    model = build_mlp(batch, sizes)
    flops = 2 * batch * sum(k * n for k, n in zip(sizes[:-1], sizes[1:]))
    converted = Converter(precision=precision).convert(model)
    runner = ModelRunner(Compiler.compile(converted.SerializeToString(), ["Y"]), RuntimeConfig())
    in_dtype = runner.get_execute_inputs()[0].numpy_data_type()

    sess = cpu_session(model, threads)

    x = np.random.default_rng(1).standard_normal((batch, sizes[0])).astype(np.float32)
    feed_rt = {"X": x.astype(in_dtype)}
    out_rt = {"Y": np.zeros((batch, sizes[-1]), in_dtype)}
    for _ in range(20):  # warm-up both
        runner.execute(feed_rt, out_rt)
        sess.run(["Y"], {"X": x})
    t_rt, t_ort = [], []
    for _ in range(iters):  # interleaved: both see the same machine noise
        t0 = time.perf_counter(); runner.execute(feed_rt, out_rt); t1 = time.perf_counter()
        sess.run(["Y"], {"X": x}); t2 = time.perf_counter()
        t_rt.append(t1 - t0); t_ort.append(t2 - t1)
    med_rt, med_ort = statistics.median(t_rt), statistics.median(t_ort)
    return {
        "batch": batch, "precision": precision,
        "rt_med_ms": med_rt * 1e3, "rt_p90_ms": percentile(t_rt, 90) * 1e3,
        "ort_med_ms": med_ort * 1e3, "ort_p90_ms": percentile(t_ort, 90) * 1e3,
        "ratio": med_rt / med_ort, "rt_gflops": flops / med_rt / 1e9,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 32])
    ap.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 1024, 256])
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--precision", nargs="+", default=["fp32", "fp16"])
    args = ap.parse_args()
    print(f"# MLP {args.sizes}, {args.iters} interleaved iterations, onnxruntime {ort.__version__} "
          f"intra_op_num_threads={args.threads}, {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    print("| batch | precision | ModelRunner median ms | p90 ms | onnxruntime median ms | p90 ms | ratio (lower is better) | ModelRunner GFLOP/s |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for batch in args.batch:
        for precision in args.precision:
            r = bench(batch, args.sizes, args.iters, args.threads, precision)
            print(f"| {r['batch']} | {r['precision']} | {r['rt_med_ms']:.3f} | {r['rt_p90_ms']:.3f} | {r['ort_med_ms']:.3f} | "
                  f"{r['ort_p90_ms']:.3f} | {r['ratio']:.2f} | {r['rt_gflops']:.1f} |")


if __name__ == "__main__":
    main()
