"""What the transformer kernel fusions (fold_scale_into_matmul, merge_transposes_across_unit_reshape,
fuse_layernorm, hoist_matmul_reshape, fuse_elementwise_chain) change on the BERT encoder of
bench_models.py:
steps per run and latency, with and without them.

The cached ONNX export (model_zoo.py; exported once with tf2onnx) is converted once and
compiled twice: with the default KERNEL_FUSION_PIPELINE, and with those five passes taken out
of it (fuse_epilogue alone). Both are timed interleaved
(interleaved_timing.py) with onnxruntime at the same thread count on the standard-ONNX graph
bench_models.py gives it; a second copy of the fused model is timed too: the spread between the
two identical copies is the noise floor of the run. Outputs are checked against onnxruntime.

    .venv/bin/python benchmarks/bench_transformer_fusions.py [--batch 1 8] [--budget 20] [--quick]
"""
import argparse
import contextlib
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [_REPO, os.path.join(_REPO, "tests", "models"), os.path.join(_REPO, "benchmarks")]

import numpy as np  # noqa: E402
import onnx  # noqa: E402

from compiler.compiler import compile_converted  # noqa: E402
from compiler.converter import Converter  # noqa: E402
from compiler.kernel_fusion import pipeline  # noqa: E402
from compiler.options import CompilerOptions  # noqa: E402
from interleaved_timing import interleaved, summary  # noqa: E402
from model_contenders import modelrunner, onnxruntime_session  # noqa: E402
from model_suite import standard_onnx  # noqa: E402
from model_zoo import FULL, QUICK, cached_onnx_path  # noqa: E402
from tf_popef_op import runtime  # noqa: E402

TRANSFORMER_FUSIONS = ["fold_scale_into_matmul", "merge_transposes_across_unit_reshape", "fuse_layernorm",
                       "hoist_matmul_reshape", "fuse_elementwise_chain"]


@contextlib.contextmanager
def kernel_fusions(names):
    """KERNEL_FUSION_PIPELINE set to `names` while compiling (the compile step reads it)."""
    saved = list(pipeline.KERNEL_FUSION_PIPELINE)
    pipeline.KERNEL_FUSION_PIPELINE[:] = names
    try:
        yield
    finally:
        pipeline.KERNEL_FUSION_PIPELINE[:] = saved


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", nargs="+", type=int, default=[1, 8])
    p.add_argument("--precision", nargs="+", default=["fp32"], choices=["fp32", "fp16"])
    p.add_argument("--budget", type=float, default=20.0, help="seconds of timed iterations per batch")
    p.add_argument("--quick", action="store_true", help="the small model variant")
    args = p.parse_args(argv)
    threads = runtime.num_threads()
    spec = (QUICK if args.quick else FULL)["bert_encoder"]
    model = onnx.load(cached_onnx_path(spec, log=lambda m: print(m, file=sys.stderr)))
    without = [n for n in pipeline.KERNEL_FUSION_PIPELINE if n not in TRANSFORMER_FUSIONS]
    print("| model | batch | precision | steps without → with | without ms | with ms (2 copies) "
          "| onnxruntime fp32 ms | ratio without → with | iterations |")
    print("|---|---|---|---|---|---|---|---|---|")
    for precision in args.precision:
        for batch in args.batch:
            x = spec.inputs(batch)
            converted = Converter(batch_size=batch, precision=precision).convert(model)
            contenders, steps = {}, {}
            for label, names in (("without", without), ("with", list(pipeline.KERNEL_FUSION_PIPELINE)),
                                 ("with (copy)", list(pipeline.KERNEL_FUSION_PIPELINE))):
                with kernel_fusions(names):
                    executable = compile_converted(converted, CompilerOptions(batch_size=batch))
                    steps[label] = len(pipeline.run_kernel_fusions(converted).graph.node)
                contenders[label] = modelrunner(label, executable, x)
            contenders["onnxruntime"] = onnxruntime_session("onnxruntime", standard_onnx(model, batch, "fp32"), x,
                                                            threads)
            for c in contenders.values():
                c.call()
            want = contenders["onnxruntime"].outputs()
            for label in ("without", "with"):
                got = contenders[label].outputs()
                diff = max(float(np.abs(got[k].astype(np.float32) - want[k]).max()) for k in want)
                print(f"{spec.label} batch {batch} {precision} {label}: max |diff| vs onnxruntime {diff:.2e}",
                      file=sys.stderr)
            samples = interleaved({k: c.call for k, c in contenders.items()}, warmup=3, min_iters=10, max_iters=1000,
                                  budget_s=args.budget)
            med = {k: summary(v)["median_ms"] for k, v in samples.items()}
            ort = med["onnxruntime"]
            print(f"| {spec.label} | {batch} | {precision} | {steps['without']} → {steps['with']} "
                  f"| {med['without']:.2f} | {med['with']:.2f} / {med['with (copy)']:.2f} | {ort:.2f} "
                  f"| {med['without'] / ort:.2f}x → {med['with'] / ort:.2f}x | {len(samples['onnxruntime'])} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
