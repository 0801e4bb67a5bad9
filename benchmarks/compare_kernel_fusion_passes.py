"""One network compiled with the full kernel-fusion pipeline and with some of its passes left out,
timed in the same process (the same runtime build), interleaved: the A/B of a compiler-only
change without a second checkout.

The cached ONNX export (benchmarks/.cache, `bench_models.py --parts compile`) is compiled once per
variant (`compile_stages.compile_with_stages`, the batch and precision given; KERNEL_FUSION_PIPELINE
minus the variant's passes), then timed by interleaved_timing.interleaved (every variant once per
iteration, the order rotated, 5 ms apart). Prints each variant's median and minimum ms and its
max |diff| against the first variant's outputs.

    .venv/bin/python benchmarks/compare_kernel_fusion_passes.py convnext_tiny --batch 8 \
        --without fold_column_scale_into_matmul [--precision fp32] [--iters 8]
"""
import argparse
import glob
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(HERE), HERE]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="a cached export's name (the part of its file name before the first '-')")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "fp16"])
    ap.add_argument("--without", nargs="+", required=True, help="kernel-fusion passes the second variant leaves out")
    ap.add_argument("--iters", type=int, default=None, help="iterations (default 72 at batch 1, else 8)")
    args = ap.parse_args()
    import onnx
    from compare_popefs import random_feeds
    from compile_stages import compile_with_stages
    from interleaved_timing import interleaved
    from compiler.kernel_fusion import pipeline
    from tf_popef_op.runtime import ModelRunner, RuntimeConfig

    full = list(pipeline.KERNEL_FUSION_PIPELINE)
    unknown = [p for p in args.without if p not in full]
    if unknown:
        raise SystemExit(f"not in KERNEL_FUSION_PIPELINE: {unknown}")
    exports = sorted(glob.glob(os.path.join(HERE, ".cache", f"{args.model}-*.onnx")))
    if not exports:
        raise SystemExit(f"no ONNX export of {args.model} in benchmarks/.cache: run `bench_models.py --parts compile`")
    model = onnx.load(exports[0])
    variants = {"all passes": full, "without " + ", ".join(args.without): [p for p in full if p not in args.without]}
    runners = {}
    try:
        for tag, passes in variants.items():
            pipeline.KERNEL_FUSION_PIPELINE[:] = passes
            config = RuntimeConfig()
            config.batching_dim, config.timeout_ns = 0, 0
            runners[tag] = ModelRunner(compile_with_stages(model, args.batch, args.precision)[0], config)
    finally:
        pipeline.KERNEL_FUSION_PIPELINE[:] = full
    feeds = random_feeds(next(iter(runners.values())))
    outputs = {tag: r.execute(feeds) for tag, r in runners.items()}
    reference = next(iter(outputs.values()))
    iters = args.iters or (72 if args.batch == 1 else 8)
    seconds = interleaved({tag: (lambda r=r: r.execute(feeds)) for tag, r in runners.items()}, warmup=0,
                          min_iters=iters, max_iters=iters, budget_s=0)
    print(f"# {args.model} b{args.batch} {args.precision}, {iters} iterations, load average {os.getloadavg()[0]:.2f}")
    print("| variant | median ms | min ms | max abs diff vs all passes |")
    print("|---|---:|---:|---:|")
    for tag, s in seconds.items():
        diff = max(float(np.max(np.abs(outputs[tag][k].astype(np.float64) - reference[k].astype(np.float64))))
                   for k in reference)
        print(f"| {tag} | {np.median(s) * 1e3:.2f} | {np.min(s) * 1e3:.2f} | {diff:.1e} |")


if __name__ == "__main__":
    main()
