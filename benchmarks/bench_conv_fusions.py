"""What BatchNorm folding and the Conv/Gemm/MatMul epilogue fusions change on the full
MobileNetV2 (alpha 1.0, 224x224) and ResNet50 (224x224) of bench_keras_architectures.py
(random weights, calibrated BatchNorm): accuracy against TensorFlow and latency, fp32 and fp16.

Three compilations of the same exported ONNX model:
  none     skip_passes=[fold_batchnorm], CompilerOptions(kernel_fusion=False): every BN, Add,
           Relu/Clip is its own step (no fold, no fusion);
  fold     fold_batchnorm only;
  fused    the default: BN folded, then FusedConv with bias/sum/activation epilogues.
onnxruntime runs the `none` model (standard ONNX, BN kept: its own optimizer folds and fuses)
with the same thread count; all four are timed interleaved (benchmarks/interleaved_timing.py).
Errors are relative L2 and max-relative against TensorFlow's fp32 output.

    .venv/bin/python benchmarks/bench_conv_fusions.py [--models mobilenet_v2 resnet50] [--batch 1]
                                                      [--precision fp32 fp16] [--budget 10]
"""
import argparse
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [_REPO, os.path.join(_REPO, "tests", "models"), os.path.join(_REPO, "benchmarks")]

import numpy as np  # noqa: E402

from architecture_checks import export, l2_rel, max_rel  # noqa: E402
from bench_keras_architectures import build  # noqa: E402
from compiler.compiler import compile_converted  # noqa: E402
from compiler.converter import Converter  # noqa: E402
from compiler.options import CompilerOptions  # noqa: E402
from interleaved_timing import interleaved  # noqa: E402
from model_contenders import modelrunner, onnxruntime_session  # noqa: E402

VARIANTS = {"none": (["fold_batchnorm"], False), "fold": ([], False), "fused": ([], True)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["mobilenet_v2", "resnet50"])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--precision", nargs="+", default=["fp32", "fp16"], choices=["fp32", "fp16"])
    p.add_argument("--budget", type=float, default=10.0, help="seconds of timing per model and precision")
    args = p.parse_args(argv)
    threads = int(os.environ.get("TF_POPEF_NUM_THREADS", os.cpu_count()))
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models:
            exported = export(name, *build(name, args.batch), folder)
            for precision in args.precision:
                x = exported.inputs[:args.batch]
                contenders, converted = {}, {}
                for variant, (skip, fusion) in VARIANTS.items():
                    model = Converter(batch_size=args.batch, precision=precision,
                                      skip_passes=skip).convert(exported.onnx)
                    converted[variant] = model
                    exe = compile_converted(model, CompilerOptions(kernel_fusion=fusion), name)
                    contenders[variant] = modelrunner(variant, exe, x)
                contenders["onnxruntime"] = onnxruntime_session("onnxruntime", converted["none"], x, threads)
                line = [f"{name} batch {args.batch} {precision}:"]
                for variant, c in contenders.items():
                    c.call()
                    errs = []
                    for out, want in exported.reference.items():
                        want = want[:args.batch].astype(np.float32)
                        got = c.outputs()[out]
                        errs.append(f"l2_rel {l2_rel(got, want):.2e} max_rel {max_rel(got, want):.2e}")
                    line.append(f"  {variant:12s} {'; '.join(errs)}")
                samples = interleaved({k: c.call for k, c in contenders.items()}, warmup=2, min_iters=5,
                                      max_iters=200, budget_s=args.budget)
                base = float(np.median(samples["onnxruntime"]))
                for i, (variant, s) in enumerate(samples.items()):
                    med = float(np.median(s))
                    line[i + 1] += f"  median {med * 1e3:8.2f} ms  p90 {np.percentile(s, 90) * 1e3:8.2f} ms  " \
                                   f"x{med / base:5.2f} onnxruntime"
                print("\n".join(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
