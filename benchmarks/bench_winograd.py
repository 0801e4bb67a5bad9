"""Winograd convolutions (NchwcWinogradConv) against the direct NchwcConv tiles, interleaved.

Layers (default): ResNet50's 3x3 stride-1 layers, direct vs F(2x2,3x3) vs F(4x4,3x3) vs
onnxruntime, plus each one's max error against onnxruntime relative to the output's largest
value (the data for CompilerOptions.winograd="auto"'s rule, to_winograd_conv.choose_tile). Each
case is Conv(3x3, pads 1) + bias + Relu at a ResNet50 stage (224x224 input), compiled with
CompilerOptions(winograd=off / f2x2 / f4x4).

--resnet50: the whole ResNet50 224 (the cached tf2onnx export of bench_models.py, fp32),
winograd off vs auto, interleaved with the sgemm peak's MatMul (sgemm_peak.py), and the
profiled time of the layers auto runs as NchwcWinogradConv, in each.

--accuracy: Keras' ResNet50 (random weights, BatchNorm calibrated, as the architecture tests)
at 64x64 and 224x224, each policy's max error against TensorFlow relative to the largest logit
(the architecture tests' fp32 measure, architecture_checks.py), onnxruntime's (float32) for
comparison.

GFLOP/s count the direct convolution's FLOPs throughout. --precision fp16 compiles our side with
the Converter's fp16 (float16 activations and weights) in every mode; the errors stay against
onnxruntime's and TensorFlow's float32.

    .venv/bin/python benchmarks/bench_winograd.py [--batch 1 8] [--cases r50_3x3_56 ...] [--budget 2] [--precision fp16]
    .venv/bin/python benchmarks/bench_winograd.py --resnet50 [--batch 1 8] [--budget 20] [--precision fp16]
    .venv/bin/python benchmarks/bench_winograd.py --accuracy [--batch 1 8] [--precision fp16]
"""
import argparse
import glob
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import sgemm_peak  # noqa: E402
from bench_conv import CASES as CONV_CASES, conv_model  # noqa: E402
from compiler import Compiler  # noqa: E402
from compiler.converter import Converter  # noqa: E402
from compiler.options import CompilerOptions  # noqa: E402
from flop_count import count_flops  # noqa: E402
from interleaved_timing import interleaved  # noqa: E402
from model_contenders import modelrunner  # noqa: E402
from onnxruntime_peer import cpu_session  # noqa: E402
from tf_popef_op.runtime import ModelRunner, RuntimeConfig  # noqa: E402

CACHE = os.path.join(ROOT, "benchmarks", ".cache")
PEAK_N = 2048

CASES = ["r50_3x3_56", "r50_3x3_28", "r50_3x3_14", "r50_3x3_7"]
FEED_TYPES = {"fp32": np.float32, "fp16": np.float16}
POLICIES = ("off", "f2x2", "f4x4")


def resnet50(batches, budget: float, threads: int, precision: str) -> None:
    import onnx
    exports = glob.glob(os.path.join(CACHE, "resnet50-image_size224-*.onnx"))
    if not exports:
        raise SystemExit(f"no ResNet50 export in {CACHE}: run `bench_models.py --parts compile` first")
    print("| batch | direct ms | auto ms | auto/direct | direct GFLOP/s | auto GFLOP/s | sgemm peak GFLOP/s | "
          "direct % peak | auto % peak | Winograd layers | their direct ms | their auto ms | load |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    peak_contenders = sgemm_peak.contenders(PEAK_N, threads)
    for batch in batches:
        converted = Converter(batch_size=batch, precision=precision).convert(onnx.load(exports[0]))
        flops = count_flops(converted)
        x = np.random.default_rng(0).standard_normal([d.dim_value for d in converted.graph.input[0].type.tensor_type
                                                      .shape.dim]).astype(FEED_TYPES[precision])
        executables = {p: Compiler.compile(converted, options=CompilerOptions(batch_size=batch, winograd=p))
                       for p in ("off", "auto")}
        contenders = {name: modelrunner(name, executables[p], x).call for name, p in (("direct", "off"),
                                                                                       ("auto", "auto"))}
        contenders.update({c.name: c.call for c in peak_contenders})
        samples = interleaved(contenders, warmup=2, min_iters=5, max_iters=200, budget_s=budget)
        peak = sgemm_peak.peak_from_samples(samples, PEAK_N, threads)["peak_gflops"]
        ms = {k: float(np.median(samples[k])) * 1e3 for k in ("direct", "auto")}
        # The 3x3 layers: the steps auto runs as NchwcWinogradConv, profiled in both executables.
        profiles = {}
        for p, executable in executables.items():
            with ModelRunner(executable, RuntimeConfig(profile=True)) as runner:
                feed = {runner.get_execute_inputs()[0].name: x}
                for _ in range(2):
                    runner.execute(feed)
                runner.reset_profile()
                for _ in range(5):
                    runner.execute(feed)
                profiles[p] = runner.profile()
        names = {e["node"] for e in profiles["auto"] if e["op"] == "NchwcWinogradConv"}
        layer_ms = {p: sum(e["total_us"] for e in profiles[p] if e["node"] in names) / 5e3 for p in profiles}
        gf = {k: flops / v / 1e6 for k, v in ms.items()}
        print(f"| {batch} | {ms['direct']:.1f} | {ms['auto']:.1f} | {ms['auto'] / ms['direct']:.2f} | "
              f"{gf['direct']:.0f} | {gf['auto']:.0f} | {peak:.0f} | {100 * gf['direct'] / peak:.0f} % | "
              f"{100 * gf['auto'] / peak:.0f} % | {len(names)} | {layer_ms['off']:.1f} | {layer_ms['auto']:.1f} | "
              f"{os.getloadavg()[0]:.1f} |", flush=True)


def accuracy(batches, precision: str) -> None:
    import tempfile
    sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
    import keras
    from architecture_checks import export, max_rel, onnxruntime_outputs
    from keras_architectures import calibrate_batch_norm, resnet50 as keras_resnet50, sample_images
    policies = ("off", "f2x2", "f4x4", "auto")
    print("| model | batch | onnxruntime | " + " | ".join(policies) + " |")
    print("|---|---:|" + "---:|" * (len(policies) + 1))
    folder = tempfile.mkdtemp()
    for size in (64, 224):
        keras.utils.set_random_seed(0)
        model, x = keras_resnet50(image_size=size), sample_images(max(batches), size)
        calibrate_batch_norm(model, x)
        exported = export(f"resnet50_{size}", model, x, folder)
        for batch in batches:
            converted = Converter(batch_size=batch).convert(exported.onnx)
            ours = Converter(batch_size=batch, precision=precision).convert(exported.onnx)
            feed = {converted.graph.input[0].name: x[:batch]}
            ours_feed = {k: v.astype(FEED_TYPES[precision]) for k, v in feed.items()}
            want = {k: v[:batch] for k, v in exported.reference.items()}

            def error(got):
                return max(max_rel(np.asarray(got[k], np.float32), want[k]) for k in want)
            errors = [error(onnxruntime_outputs(converted, feed))]
            for policy in policies:
                executable = Compiler.compile(ours, options=CompilerOptions(batch_size=batch, winograd=policy))
                errors.append(error(ModelRunner(executable, RuntimeConfig()).execute(ours_feed)))
            print(f"| ResNet50 {size}x{size} {precision} | {batch} | " + " | ".join(f"{e:.2e}" for e in errors) + " |",
                  flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", nargs="+", type=int, default=[1, 8])
    p.add_argument("--cases", nargs="+", default=CASES)
    p.add_argument("--budget", type=float, default=2.0, help="seconds of timing per case")
    p.add_argument("--resnet50", action="store_true", help="the whole ResNet50 224 instead of its layers")
    p.add_argument("--accuracy", action="store_true", help="each policy's error through ResNet50 vs TensorFlow")
    p.add_argument("--precision", choices=sorted(FEED_TYPES), default="fp32",
                   help="our side's precision (onnxruntime's and TensorFlow's stay float32)")
    args = p.parse_args(argv)
    threads = int(os.environ.get("TF_POPEF_NUM_THREADS", os.cpu_count()))
    print(f"threads {threads}; {args.precision}; load average {os.getloadavg()[0]:.1f}")
    if args.resnet50:
        resnet50(args.batch, args.budget, threads, args.precision)
        return
    if args.accuracy:
        accuracy(args.batch, args.precision)
        return
    print(f"{'case':12s} {'batch':>5s} {'ort ms':>8s} " + " ".join(f"{p + ' ms':>9s} {'GFLOP/s':>7s} {'err':>7s}"
                                                                  for p in POLICIES) + "  best")
    for batch in args.batch:
        for name in args.cases:
            c, hw = CONV_CASES[name][:2]
            model, flops = conv_model(*CONV_CASES[name], batch)
            x = np.random.default_rng(1).standard_normal([batch, c, hw, hw]).astype(np.float32)
            sess = cpu_session(model, threads)
            want = sess.run(None, {"X": x})[0]
            ours = model if args.precision == "fp32" else Converter(precision=args.precision).convert(model)
            feed = {"X": x.astype(FEED_TYPES[args.precision])}
            runners, outs, errs = {}, {}, {}
            for policy in POLICIES:
                runners[policy] = ModelRunner(Compiler.compile(ours, options=CompilerOptions(winograd=policy)),
                                              RuntimeConfig())
                got = runners[policy].execute(feed)["Y"].astype(np.float32)
                errs[policy] = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
                outs[policy] = np.empty(got.shape, FEED_TYPES[args.precision])
            contenders = {policy: (lambda r=runners[policy], o=outs[policy]: r.execute(feed, {"Y": o}))
                          for policy in POLICIES}
            contenders["ort"] = lambda: sess.run(None, {"X": x})
            samples = interleaved(contenders, warmup=3, min_iters=5, max_iters=400, budget_s=args.budget)
            ms = {k: float(np.median(v)) * 1e3 for k, v in samples.items()}
            best = min(POLICIES, key=ms.get)
            print(f"{name:12s} {batch:5d} {ms['ort']:8.3f} " + " ".join(
                f"{ms[p]:9.3f} {flops / ms[p] / 1e6:7.1f} {errs[p]:7.1e}" for p in POLICIES) + f"  {best}", flush=True)


if __name__ == "__main__":
    main()
