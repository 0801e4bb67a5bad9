"""What the converter passes fold_conv_affine and fold_pad_into_conv change on the real networks
of bench_models.py: steps per run and latency, with and without the two passes.

The cached ONNX export of each model (model_zoo.py; exported once with tf2onnx) is converted
twice, with the default pipeline and with skip_passes=[fold_conv_affine, fold_pad_into_conv],
both lowered with the default CompilerOptions (kernel fusion on), and timed interleaved
(interleaved_timing.py) with onnxruntime at the same thread count on the standard-ONNX graph
bench_models.py gives it (model_suite.standard_onnx: no "fuse" passes, so unfolded; onnxruntime
folds on its own). A
second copy of the folded model is timed too: the spread between the two identical copies is
the noise floor of the run. Outputs are checked against onnxruntime (max |diff|).

    .venv/bin/python benchmarks/bench_graph_folds.py [--models mobilenet_v2 resnet50 bert_encoder]
                                                      [--batch 1 8] [--budget 20] [--quick]
"""
import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [_REPO, os.path.join(_REPO, "tests", "models"), os.path.join(_REPO, "benchmarks")]

import numpy as np  # noqa: E402
import onnx  # noqa: E402

from compiler.compiler import compile_converted  # noqa: E402
from compiler.converter import Converter  # noqa: E402
from compiler.kernel_fusion import run_kernel_fusions  # noqa: E402
from compiler.options import CompilerOptions  # noqa: E402
from interleaved_timing import interleaved, summary  # noqa: E402
from model_contenders import modelrunner, onnxruntime_session  # noqa: E402
from model_suite import standard_onnx  # noqa: E402
from model_zoo import FULL, QUICK, cached_onnx_path  # noqa: E402
from tf_popef_op import runtime  # noqa: E402

FOLDS = ["fold_conv_affine", "fold_pad_into_conv"]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["mobilenet_v2"], choices=sorted(FULL))
    p.add_argument("--batch", nargs="+", type=int, default=[1, 8])
    p.add_argument("--budget", type=float, default=20.0, help="seconds of timed iterations per model x batch")
    p.add_argument("--quick", action="store_true", help="the small model variants")
    args = p.parse_args(argv)
    threads = runtime.num_threads()
    print("| model | batch | nodes after kernel fusion, without → with | without folds ms "
          "| with folds ms (2 copies) | onnxruntime ms | ratio without → with | iterations |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.models:
        spec = (QUICK if args.quick else FULL)[name]
        model = onnx.load(cached_onnx_path(spec, log=lambda m: print(m, file=sys.stderr)))
        for batch in args.batch:
            x = spec.inputs(batch)
            contenders, steps = {}, {}
            for label, skip in (("without", FOLDS), ("with", []), ("with (copy)", [])):
                converted = Converter(batch_size=batch, skip_passes=skip).convert(model)
                executable = compile_converted(converted, CompilerOptions(batch_size=batch))
                steps[label] = len(run_kernel_fusions(converted).graph.node)
                contenders[label] = modelrunner(label, executable, x)
            peer = standard_onnx(model, batch, "fp32")
            contenders["onnxruntime"] = onnxruntime_session("onnxruntime", peer, x, threads)
            for c in contenders.values():
                c.call()
            want = contenders["onnxruntime"].outputs()
            for label in ("without", "with"):
                got = contenders[label].outputs()
                diff = max(float(np.abs(got[k] - want[k]).max()) for k in want)
                print(f"{spec.label} batch {batch} {label} folds: max |diff| vs onnxruntime {diff:.2e}",
                      file=sys.stderr)
            samples = interleaved({k: c.call for k, c in contenders.items()}, warmup=3, min_iters=10,
                                  max_iters=1000, budget_s=args.budget)
            med = {k: summary(v)["median_ms"] for k, v in samples.items()}
            ort = med["onnxruntime"]
            print(f"| {spec.label} | {batch} | {steps['without']} → {steps['with']} | {med['without']:.2f} "
                  f"| {med['with']:.2f} / {med['with (copy)']:.2f} | {ort:.2f} "
                  f"| {med['without'] / ort:.2f}x → {med['with'] / ort:.2f}x | {len(samples['onnxruntime'])} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
