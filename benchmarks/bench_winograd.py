"""ResNet50's 3x3 stride-1 convolution layers: the direct NchwcConv tiles vs Winograd F(2x2,3x3)
and F(4x4,3x3) (NchwcWinogradConv) vs onnxruntime, interleaved, plus each one's max error against
onnxruntime (the data for CompilerOptions.winograd="auto"'s rule, to_winograd_conv.choose_tile).

Each case is Conv(3x3, pads 1) + bias + Relu at a ResNet50 stage (224x224 input), compiled with
CompilerOptions(winograd=off / f2x2 / f4x4); GFLOP/s count the direct convolution's FLOPs.

    .venv/bin/python benchmarks/bench_winograd.py [--batch 1 8] [--cases r50_3x3_56 ...] [--budget 2]
"""
import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

from bench_conv import CASES as CONV_CASES, conv_model  # noqa: E402
from compiler import Compiler  # noqa: E402
from compiler.options import CompilerOptions  # noqa: E402
from interleaved_timing import interleaved  # noqa: E402
from onnxruntime_peer import cpu_session  # noqa: E402
from tf_popef_op.runtime import ModelRunner, RuntimeConfig  # noqa: E402

CASES = ["r50_3x3_56", "r50_3x3_28", "r50_3x3_14", "r50_3x3_7"]
POLICIES = ("off", "f2x2", "f4x4")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", nargs="+", type=int, default=[1, 8])
    p.add_argument("--cases", nargs="+", default=CASES)
    p.add_argument("--budget", type=float, default=2.0, help="seconds of timing per case")
    args = p.parse_args(argv)
    threads = int(os.environ.get("TF_POPEF_NUM_THREADS", os.cpu_count()))
    print(f"threads {threads}; load average {os.getloadavg()[0]:.1f}")
    print(f"{'case':12s} {'batch':>5s} {'ort ms':>8s} " + " ".join(f"{p + ' ms':>9s} {'GFLOP/s':>7s} {'err':>7s}"
                                                                  for p in POLICIES) + "  best")
    for batch in args.batch:
        for name in args.cases:
            c, hw = CONV_CASES[name][:2]
            model, flops = conv_model(*CONV_CASES[name], batch)
            x = np.random.default_rng(1).standard_normal([batch, c, hw, hw]).astype(np.float32)
            sess = cpu_session(model, threads)
            want = sess.run(None, {"X": x})[0]
            runners, outs, errs = {}, {}, {}
            for policy in POLICIES:
                runners[policy] = ModelRunner(Compiler.compile(model, options=CompilerOptions(winograd=policy)),
                                              RuntimeConfig())
                got = runners[policy].execute({"X": x})["Y"]
                errs[policy] = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
                outs[policy] = np.empty_like(got)
            contenders = {policy: (lambda r=runners[policy], o=outs[policy]: r.execute({"X": x}, {"Y": o}))
                          for policy in POLICIES}
            contenders["ort"] = lambda: sess.run(None, {"X": x})
            samples = interleaved(contenders, warmup=3, min_iters=5, max_iters=400, budget_s=args.budget)
            ms = {k: float(np.median(v)) * 1e3 for k, v in samples.items()}
            best = min(POLICIES, key=ms.get)
            print(f"{name:12s} {batch:5d} {ms['ort']:8.3f} " + " ".join(
                f"{ms[p]:9.3f} {flops / ms[p] / 1e6:7.1f} {errs[p]:7.1e}" for p in POLICIES) + f"  {best}", flush=True)


if __name__ == "__main__":
    main()
