"""The benchmark suite on real networks: ModelRunner vs onnxruntime, OpenVINO and TensorFlow.

    .venv/bin/python benchmarks/bench_models.py [--parts peak latency batching memory profile]
        [--models mobilenet_v2 resnet50 bert_encoder efficientnet_b0 densenet121 convnext_tiny
                  inception_v3 vit_encoder] [--batch 1 8] [--threads N] [--block-rounds 3] [--block-runs 20]
        [--markdown FILE] [--json FILE] [--chart FILE.png] [--quick] [--reuse-popef]

Parts (all by default):
- compile: every PopEF (model x batch x precision) compiled and cached in benchmarks/.cache, with
  its compile time per stage; later runs with --reuse-popef time those PopEFs without compiling.
- peak: the machine's fp32 GEMM peak (sgemm_peak.py), the yardstick of the GFLOP/s columns. With
  the latency part, the same MatMuls are also timed inside every cell, interleaved with the
  models, and each cell's share of peak is against that cell's own peak (the machine drifts).
- latency: each model x batch: ModelRunner fp32 and fp16, onnxruntime fp32 and fp16 (if it runs;
  the standard-ONNX graph of model_suite.standard_onnx) and TensorFlow (fp32, the Keras model) interleaved iteration by iteration
  (interleaved_timing.py); median/p90 latency, ratio to onnxruntime fp32, GFLOP/s
  (flop_count.py: 2 x MACs of Conv/ConvTranspose/MatMul/Gemm/Einsum) against the peak, the compile
  time of every PopEF (compile_stages.py: per stage), and each output's error against
  onnxruntime fp32 (a wrong kernel cannot hide behind a fast time). OpenVINO (openvino_peer.py:
  the same standard ONNX, CPU plugin, latency hint, one stream, same threads, fp32 pinned) is
  the second peer, timed with them. Then block timing (--block-rounds rounds of up to
  --block-runs consecutive runs per runtime) of our PopEFs and the fp32 peers at their defaults
  (onnxruntime spinning on). Each cell's verdict is its ratio to the best peer figure of either
  mode (peer_verdict.py). A model that fails to compile or run is a failure row naming the error.
- batching: batch-1 requests from 1, 4, 16 client threads against the batch-8 model with
  dynamic batching vs sequential execution (cross_request_batching.py).
- memory: PopEF load time, first-run time and peak resident memory of each model in a fresh
  process, ModelRunner vs onnxruntime (memory_probe.py).
- profile: time per op type and per op class (op_classes.py: convolutions by kind and kernel
  size) of one fp32 run, ModelRunner's per-op profiler next to onnxruntime's and OpenVINO's
  (op_profiles.py); op classes above 1.5x a peer's time are flagged.

A failing part is reported (output and exit status 1) and the other parts still run.

Threads: ModelRunner's intra-op pool has TF_POPEF_NUM_THREADS threads (default: the cores);
--threads sets it, and onnxruntime (intra_op_num_threads, inter-op 1, sequential) and
TensorFlow (intra-op, inter-op 1) and OpenVINO (INFERENCE_NUM_THREADS) get the same number. The models are the Keras builders of
tests/models/keras_architectures.py (random weights, calibrated BatchNorm), exported once with
tf2onnx into benchmarks/.cache/ (model_zoo.py); the PopEF compile is redone every run unless
--reuse-popef. --quick: small variants of the networks and tiny iteration counts, a smoke
run of every code path.
"""
import argparse
import datetime
import json
import os
import platform
import sys
import tempfile
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.dirname(_HERE), _HERE]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

PARTS = ("compile", "peak", "latency", "batching", "memory", "profile")
MODELS = ("mobilenet_v2", "resnet50", "bert_encoder", "efficientnet_b0", "densenet121", "convnext_tiny",
          "inception_v3", "vit_encoder")  # model_zoo.TUNED + model_zoo.FAMILIES


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    p.add_argument("--batch", nargs="+", type=int, default=[1, 8])
    p.add_argument("--threads", type=int, default=None,
                   help="intra-op threads of every runtime (default: TF_POPEF_NUM_THREADS or the cores)")
    p.add_argument("--budget", type=float, default=60.0,
                   help="seconds of timed iterations per model x batch (after --min-iters)")
    p.add_argument("--min-iters", type=int, default=10)
    p.add_argument("--block-rounds", type=int, default=3,
                   help="rounds of block timing per model x batch after the interleaved one (0: none)")
    p.add_argument("--block-runs", type=int, default=20,
                   help="consecutive runs per block at most (fewer where the rounds would overrun --budget)")
    p.add_argument("--max-iters", type=int, default=300)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--peak-n", type=int, default=2048, help="size of the square MatMul measuring the peak")
    p.add_argument("--peak-iters", type=int, default=15)
    p.add_argument("--batching-model", default="mobilenet_v2", choices=MODELS)
    p.add_argument("--clients", nargs="+", type=int, default=[1, 4, 16])
    p.add_argument("--requests", type=int, default=64, help="batch-1 requests per batching configuration and round")
    p.add_argument("--rounds", type=int, default=2, help="rounds of every batching configuration")
    p.add_argument("--batching-timeout-us", type=int, default=5000,
                   help="RuntimeConfig.timeout of the dynamic-batching runner (the runtime's default: 5000)")
    p.add_argument("--profile-iters", type=int, default=5, help="profiled runs per model (profile part)")
    p.add_argument("--reuse-popef", action="store_true", help="reuse PopEFs compiled by an earlier run (cache)")
    p.add_argument("--quick", action="store_true", help="small models, tiny iteration counts (smoke run)")
    p.add_argument("--markdown", help="also write the markdown tables to this file")
    p.add_argument("--json", help="write every measurement to this JSON file")
    p.add_argument("--chart", help="write the PNG chart to this file (needs matplotlib: requirements-bench.txt)")
    args = p.parse_args(argv)
    if args.quick:
        args.budget, args.min_iters, args.max_iters, args.warmup = 0.0, 3, 3, 1
        args.block_runs, args.block_rounds = 3, 2
        args.peak_n, args.peak_iters = 512, 3
        args.requests, args.rounds, args.profile_iters = 16, 1, 2
    return args


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def machine_info(threads):
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": model, "cores": os.cpu_count(), "threads": threads, "load_average_start": os.getloadavg(),
            "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def import_runtime():
    """Imports the runtime once for the whole process. On a development tree shared with other
    builds the library can be mid-relink ("file too short"): wait for it rather than fail."""
    for attempt in range(12):
        try:
            import tf_popef_op.runtime  # noqa: F401
            return
        except ImportError as e:
            if attempt == 11:
                raise
            for name in [m for m in sys.modules if m.startswith("tf_popef_op")]:
                del sys.modules[name]
            log(f"runtime import failed ({e}); retrying in 10 s")
            time.sleep(10)


def write_reports(results, args, suffix=""):
    import report
    if args.markdown:
        with open(args.markdown + suffix, "w") as f:
            f.write(report.markdown(results))
    if args.json:
        with open(args.json + suffix, "w") as f:
            json.dump(results, f, indent=1, default=float)


def main(argv=None) -> int:
    args = parse_args(argv)
    threads = args.threads or int(os.environ.get("TF_POPEF_NUM_THREADS") or os.cpu_count())
    os.environ["TF_POPEF_NUM_THREADS"] = str(threads)  # before the runtime's pool exists

    # TensorFlow's thread pools are fixed at its first op: configure them before anything runs.
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import onnxruntime as ort
    import openvino as ov
    import_runtime()

    import model_zoo
    import model_suite
    import report

    results = {"command": "benchmarks/bench_models.py " + " ".join(sys.argv[1:] if argv is None else argv),
               "machine": machine_info(threads),
               "versions": {"onnxruntime": ort.__version__, "openvino": ov.get_version(),
                            "tensorflow": tf.__version__},
               "quick": args.quick}
    specs = model_zoo.QUICK if args.quick else model_zoo.FULL
    work = tempfile.mkdtemp(prefix="bench_models_")
    started = time.perf_counter()

    suite = model_suite.ModelSuite(specs, threads, args, work, log)
    failed = []

    def part(name, fn):
        """Runs one part; a failure is logged and recorded, and the other parts still run."""
        if name not in args.parts:
            return
        try:
            fn()
        except Exception as e:  # reported in the output and the exit code
            log(f"part '{name}' failed: {type(e).__name__}: {e}")
            results.setdefault("errors", {})[name] = f"{type(e).__name__}: {e}"
            failed.append(name)

    peak_contenders = []  # the peak part's MatMuls, timed again inside every latency cell

    def compile_part():
        results["compile"] = suite.compile_all(args.models, args.batch)
        args.reuse_popef = True  # the parts after it load these PopEFs rather than compile again

    def peak():
        import sgemm_peak
        log(f"sgemm peak: MatMul {args.peak_n}x{args.peak_n}, {threads} threads")
        peak_contenders[:] = sgemm_peak.contenders(args.peak_n, threads)
        results["peak"] = sgemm_peak.measure_peak(args.peak_n, threads, args.peak_iters, peak_contenders)

    def write_partial(cells, compiles):
        """The cells so far, in case the run is stopped: FILE.partial next to --markdown/--json."""
        results["cells"] = cells
        results.setdefault("compile", compiles)  # the compile part's times, where it ran
        write_reports(results, args, suffix=".partial")

    def latency():
        results["cells"], compiles = suite.latency(args.models, args.batch, peak_contenders, write_partial)
        if "compile" not in args.parts:
            results["compile"] = compiles

    def batching():
        log(f"cross-request batching on {args.batching_model}")
        results["batching"] = suite.batching(args.batching_model)

    def memory():
        results["memory"] = suite.memory(args.models, args.batch)

    def profile():
        results["profile"] = suite.profile(args.models, args.batch)

    for name, fn in (("compile", compile_part), ("peak", peak), ("latency", latency), ("batching", batching), ("memory", memory),
                     ("profile", profile)):
        part(name, fn)
    results["machine"]["load_average_end"] = os.getloadavg()
    results["wall_s"] = time.perf_counter() - started

    print(report.markdown(results))
    write_reports(results, args)
    for path in (args.markdown, args.json):
        if path and os.path.exists(path + ".partial"):
            os.remove(path + ".partial")  # the run completed
    if args.chart and results.get("cells"):
        import report_chart
        report_chart.write(results, args.chart)
        log(f"chart written to {args.chart}")
    log(f"done in {results['wall_s']:.0f} s" + (f"; FAILED parts: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
