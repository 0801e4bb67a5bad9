"""Model fusion vs model switching: requests alternating between two MLPs served by
(a) ONE fused executable (the `index` input picks the subgraph; weights of both stay loaded), or
(b) TWO separate executables whose runners share ONE emulated device (RuntimeConfig.device_id),
    so every switch reloads the other model's weights, as on a single IPU.

The setups are measured interleaved in the same run (A/B requests of (a), then of (b)), so both
see the same machine noise; device reload counts and times come from DeviceManager().devices().

    .venv/bin/python benchmarks/bench_fusion.py [--sizes 512 1024 1024 64] [--batch 1] [--iters 200]
"""
import argparse
import platform
import statistics
import time

import numpy as np
from onnx import numpy_helper

from compiler import Compiler
from compiler.fusion import fuse_models
from tf_popef_op.runtime import DeviceManager, ModelRunner, RuntimeConfig

from mlp_model import build_mlp


def device_stats(device_id):
    return next(d for d in DeviceManager().devices() if d["id"] == device_id)


def delta(after, before):
    keys = ("load_count", "reload_count", "total_load_ns")
    return {k: after[k] - before[k] for k in keys}


def pick_devices():
    """Two idle devices of the same IPU version: one for (a), one shared by both runners of (b)."""
    devices = DeviceManager().devices()
    for version in ("ipu2", "ipu21"):
        idle = [d["id"] for d in devices if d["ipu_version"] == version and d["runners"] == 0]
        if len(idle) >= 2:
            return version, idle[0], idle[1]
    raise SystemExit("bench_fusion: needs two idle emulated devices of the same IPU version")


def ms(seconds):
    return seconds * 1e3


def summary(samples):
    return statistics.median(samples), float(np.percentile(np.asarray(samples), 90))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 1024, 64],
                    help="layer widths of each MLP (default: about 6.3 MB of float32 weights per model)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--iters", type=int, default=200, help="A/B request pairs per setup")
    ap.add_argument("--warmup", type=int, default=10)
    args = ap.parse_args()

    models = [build_mlp(args.batch, args.sizes, seed) for seed in (0, 1)]
    weight_mb = sum(numpy_helper.to_array(t).nbytes for t in models[0].graph.initializer) / 1e6
    ipu_version, fused_device, shared_device = pick_devices()
    fused = fuse_models([dict(input_model=m) for m in models])
    separate = [Compiler.compile(m) for m in models]

    fused_runner = ModelRunner(fused, RuntimeConfig(device_id=fused_device))
    separate_runners = [ModelRunner(exe, RuntimeConfig(device_id=shared_device)) for exe in separate]
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal((args.batch, args.sizes[0])).astype(np.float32) for _ in range(2)]
    outs = [np.zeros((args.batch, args.sizes[-1]), np.float32) for _ in range(2)]
    fused_feeds = [{"index": np.array([i], np.int32), f"graph{i}/stream0": xs[i]} for i in range(2)]

    def fused_call(i):
        fused_runner.execute(fused_feeds[i], {f"graph{i}/Y": outs[i]})

    def separate_call(i):
        separate_runners[i].execute({"X": xs[i]}, {"Y": outs[i]})

    # Same answers both ways (the benchmark compares like with like).
    for i in range(2):
        fused_call(i)
        expected = outs[i].copy()
        separate_call(i)
        np.testing.assert_allclose(outs[i], expected, rtol=1e-5, atol=1e-6)
    for _ in range(args.warmup):
        for i in range(2):
            fused_call(i)
            separate_call(i)

    before = {d: device_stats(d) for d in (fused_device, shared_device)}
    t_fused, t_separate = [], []
    for _ in range(args.iters):
        for i in range(2):  # alternate A, B
            t0 = time.perf_counter(); fused_call(i); t1 = time.perf_counter()
            t_fused.append(t1 - t0)
        for i in range(2):
            t0 = time.perf_counter(); separate_call(i); t1 = time.perf_counter()
            t_separate.append(t1 - t0)
    stats = {d: delta(device_stats(d), before[d]) for d in (fused_device, shared_device)}
    for r in [fused_runner, *separate_runners]:
        r.close()

    fm, fp = summary(t_fused)
    sm, sp = summary(t_separate)
    rows = [("(a) one fused executable", fm, fp, stats[fused_device]),
            ("(b) two executables, one shared device", sm, sp, stats[shared_device])]
    print(f"# bench_fusion: {platform.processor() or platform.machine()}, {args.iters} A/B pairs per setup, "
          f"batch {args.batch}, MLP {'x'.join(map(str, args.sizes))} ({weight_mb:.1f} MB of weights per model), "
          f"{ipu_version}\n")
    print("| setup | median ms/request | p90 ms/request | device loads | reloads | total load time ms | "
          "load ms per reload |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, med, p90, st in rows:
        per_reload = ms(st["total_load_ns"] / 1e9 / st["reload_count"]) if st["reload_count"] else 0.0
        print(f"| {name} | {ms(med):.3f} | {ms(p90):.3f} | {st['load_count']} | {st['reload_count']} | "
              f"{ms(st['total_load_ns'] / 1e9):.1f} | {per_reload:.3f} |")
    print(f"\nswitching / fused: median {sm / fm:.2f}x, p90 {sp / fp:.2f}x")


if __name__ == "__main__":
    main()
