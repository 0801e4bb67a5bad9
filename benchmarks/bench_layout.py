"""What is the blocked (NCHWc) activation layout worth, to us and to onnxruntime? ModelRunner
with its default blocked layout (NCHW8c, CompilerOptions.blocked_layout) and in plain NCHW
(blocked_layout=False: im2col/pointwise SGEMMs and the direct depthwise kernel) vs onnxruntime as
configured by default (ORT_ENABLE_ALL: convolutions in NCHWc, MLAS's blocked kernels) and
stopped at ORT_ENABLE_EXTENDED (plain NCHW), on the networks of bench_models.py, interleaved in
one run.

    .venv/bin/python benchmarks/bench_layout.py [--models mobilenet_v2 resnet50] [--batch 1]
                                                [--iters 100] [--threads T] [--quick]
"""
import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["mobilenet_v2", "resnet50"],
                    choices=["mobilenet_v2", "resnet50", "bert_encoder"])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--quick", action="store_true", help="the small model sizes (smoke run)")
    args = ap.parse_args()
    threads = args.threads or int(os.environ.get("TF_POPEF_NUM_THREADS") or os.cpu_count())
    os.environ["TF_POPEF_NUM_THREADS"] = str(threads)

    # The sample inputs come from the Keras side (model_zoo): TensorFlow is imported before
    # onnxruntime and the runtime, in bench_models.py's order (the reverse crashes at exit).
    import tensorflow  # noqa: F401
    import onnx
    import onnxruntime as ort
    import model_zoo
    from compiler import Compiler
    from compiler.options import CompilerOptions
    from interleaved_timing import interleaved, summary
    from model_contenders import modelrunner, onnxruntime_session
    from model_suite import standard_onnx

    print(f"{threads} intra-op threads, batch {args.batch}, {args.iters} interleaved iterations (5 ms apart)\n")
    print("| model | ModelRunner NCHWc median / p90 ms | ModelRunner NCHW | onnxruntime NCHWc | onnxruntime NCHW "
          "| ours NCHWc / ORT NCHWc | ours NCHW / ORT NCHW |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in args.models:
        spec = (model_zoo.QUICK if args.quick else model_zoo.FULL)[name]
        model = onnx.load(model_zoo.cached_onnx_path(spec, log=lambda m: print(m, file=sys.stderr)))
        x = spec.inputs(args.batch)
        standard = standard_onnx(model, args.batch, "fp32")
        exe = {blocked: Compiler.compile(model.SerializeToString(),
                                         options=CompilerOptions(batch_size=args.batch, blocked_layout=blocked))
               for blocked in (True, False)}
        contenders = {
            "ours": modelrunner("ours", exe[True], x).call,
            "ours_nchw": modelrunner("ours_nchw", exe[False], x).call,
            "nchwc": onnxruntime_session("nchwc", standard, x, threads).call,
            "nchw": onnxruntime_session("nchw", standard, x, threads,
                                        ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED).call,
        }
        s = {k: summary(v) for k, v in interleaved(contenders, warmup=3, min_iters=args.iters, max_iters=args.iters,
                                                    budget_s=0.0).items()}

        def cell(k):
            return f"{s[k]['median_ms']:.2f} / {s[k]['p90_ms']:.2f}"
        print(f"| {spec.label} | {cell('ours')} | {cell('ours_nchw')} | {cell('nchwc')} | {cell('nchw')} | "
              f"{s['ours']['median_ms'] / s['nchwc']['median_ms']:.2f} | "
              f"{s['ours_nchw']['median_ms'] / s['nchw']['median_ms']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
