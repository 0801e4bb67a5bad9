"""bench_models.py's results as markdown tables (the format of docs/benchmarks.md)."""
from typing import List

FP32_TARGET = 1.5       # target: every fp32 cell within 1.5x onnxruntime's median latency
PEAK_TARGET = 0.70      # target: ResNet50 batch 8 at >= 70 % of the measured sgemm peak


def _table(header: List[str], align: str, rows: List[List[str]]) -> List[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"] + ["| " + " | ".join(r) + " |" for r in rows]


def _ms(s):
    return "—" if s is None else f"{s['median_ms']:.2f} / {s['p90_ms']:.2f}"


def _worst_error(errors: dict) -> float:
    return max((e["max_rel"] for e in errors.values()), default=float("nan"))


def header(r) -> List[str]:
    m = r["machine"]
    return [f"`{r['command']}` — {m['date_utc']}, {m['cpu']}, {m['cores']} cores, {m['threads']} threads for "
            f"every runtime, onnxruntime {r['versions']['onnxruntime']}, TensorFlow {r['versions']['tensorflow']}, "
            f"load average {m['load_average_start'][0]:.1f} at the start, {m.get('load_average_end', [0])[0]:.1f} at "
            f"the end, {r.get('wall_s', 0) / 60:.1f} min" + (" (**--quick: small models, not results**)" if r["quick"] else "")]


def peak_section(p) -> List[str]:
    rows = [[name, f"{s['median_ms']:.1f}", f"{s['median_gflops']:.1f}", f"{s['best_gflops']:.1f}"] for name, s in p["by"].items()]
    return ([f"**Measured sgemm peak: {p['peak_gflops']:.1f} GFLOP/s** ({p['peak_from']}'s median; fp32 MatMul "
             f"{p['n']}×{p['n']} × {p['n']}×{p['n']}, {p['threads']} threads, {p['by'][p['peak_from']]['iterations']} "
             f"interleaved iterations)", ""]
            + _table(["runtime", "median ms", "median GFLOP/s", "best-iteration GFLOP/s"], ["---", "---:", "---:", "---:"], rows))


def latency_section(cells, peak) -> List[str]:
    rows = []
    for c in cells:
        ort16 = _ms(c["onnxruntime_fp16"]) if c["onnxruntime_fp16"] else "does not run"
        ratio = c["ratio_to_onnxruntime"]
        mark = " ✗" if c["precision"] == "fp32" and ratio > FP32_TARGET else ""
        rows.append([c["label"], str(c["batch"]), c["precision"], _ms(c["ours"]), _ms(c["onnxruntime_fp32"]),
                     f"**{ratio:.2f}**{mark}", ort16, _ms(c["tensorflow_fp32"]), f"{c['ratio_to_tensorflow']:.2f}",
                     f"{_worst_error(c['errors_vs_onnxruntime_fp32']['ours']):.1e}", str(c["ours"]["iterations"])])
    out = _table(["model", "batch", "precision", "ModelRunner median / p90 ms", "onnxruntime fp32 median / p90 ms",
                  "ratio to onnxruntime", "onnxruntime fp16 median / p90 ms", "TensorFlow fp32 median / p90 ms",
                  "ratio to TensorFlow", "ModelRunner max rel err vs onnxruntime fp32", "iterations"],
                 ["---", "---:", "---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:"], rows)
    out += ["", f"✗: fp32 cell above the {FP32_TARGET}× target. fp16 rows time our fp16 PopEF against onnxruntime's "
            "fp32 model (the ratio) and its fp16 model where its CPU provider runs it."]
    reasons = {c["onnxruntime_fp16_error"] for c in cells if c["onnxruntime_fp16_error"]}
    for reason in sorted(reasons):
        out.append(f"onnxruntime fp16 fails: `{reason}`")
    in_cell = all(c.get("peak") for c in cells)
    yardstick = ("share of the sgemm peak timed in the same cell, interleaved with the models (the "
                 "\"sgemm peak\" column)" if in_cell else
                 f"share of the {peak['peak_gflops']:.0f} GFLOP/s peak" if peak else None)
    out += ["", "GFLOP/s (FLOPs = 2 × MACs of Conv/ConvTranspose/MatMul/Gemm/Einsum in the standard fp32 ONNX graph; "
            "everything else counted as zero)" + (f", and {yardstick}:" if yardstick else ":"), ""]

    def peak_of(c):
        """The cell's yardstick: its own interleaved peak, else the run's, else None."""
        return c["peak"]["peak_gflops"] if in_cell else peak["peak_gflops"] if peak else None

    rows = []
    for c in cells:
        g = c["gflops"]
        cell_peak = peak_of(c)

        def pct(v):
            return f"{v:.1f} ({100 * v / cell_peak:.0f} %)" if cell_peak else f"{v:.1f}"
        rows.append([c["label"], str(c["batch"]), c["precision"], f"{c['flops'] / 1e9:.2f}",
                     pct(g[f"ModelRunner {c['precision']}"]), pct(g["onnxruntime fp32"]),
                     pct(g["onnxruntime fp16"]) if "onnxruntime fp16" in g else "—", pct(g["TensorFlow fp32"])]
                    + ([f"{cell_peak:.1f}"] if in_cell else []))
    out += _table(["model", "batch", "precision", "GFLOP per run", "ModelRunner GFLOP/s", "onnxruntime fp32",
                   "onnxruntime fp16", "TensorFlow fp32"] + (["sgemm peak"] if in_cell else []),
                  ["---", "---:", "---", "---:", "---:", "---:", "---:", "---:"] + (["---:"] if in_cell else []), rows)
    target = next((c for c in cells if (c["model"], c["batch"], c["precision"]) == ("resnet50", 8, "fp32")), None)
    if target and peak_of(target):
        share = target["gflops"]["ModelRunner fp32"] / peak_of(target)
        out += ["", f"ResNet50 batch 8 fp32: **{100 * share:.0f} %** of the sgemm peak "
                f"({'✓' if share >= PEAK_TARGET else '✗'} target {PEAK_TARGET:.0%})."]
    return out


def batching_section(b) -> List[str]:
    rows = [[name, str(v["clients"]), f"{v['requests_per_s']:.1f}", f"{v['p50_ms']:.2f}", f"{v['p99_ms']:.2f}", str(v["requests"])]
            for name, v in b.items() if not name.startswith("_")]
    s = b["_dynamic_runner_stats"]
    return ([f"{b['_model']} fp32, batch-1 requests, dynamic-batching timeout {b['_timeout_us']} µs.", ""]
            + _table(["configuration", "client threads", "requests/s", "p50 ms", "p99 ms", "requests timed"],
                     ["---", "---:", "---:", "---:", "---:", "---:"], rows)
            + ["", f"Dynamic-batching runner over all its runs: {s['requests']} requests in {s['batches_run']} batches "
               f"({s['multi_request_batches']} shared by several requests, {s['padded_rows']} padded rows)."])


def compile_section(compiles) -> List[str]:
    rows = [[c["label"], str(c["batch"]), c["precision"], "reused" if c["compile_s"] is None else f"{c['compile_s']:.2f}"]
            for c in compiles]
    out = _table(["model", "batch", "precision", "ONNX → PopEF s"], ["---", "---:", "---", "---:"], rows)
    detailed = next((c for c in compiles if c["model"] == "resnet50" and c["precision"] == "fp32" and c["stages"]),
                    next((c for c in compiles if c["stages"]), None))
    if detailed:
        stages = sorted(detailed["stages"].items(), key=lambda kv: -kv[1])
        shown, rest = stages[:10], stages[10:]
        rows = [[k, f"{v:.3f}"] for k, v in shown] + ([[f"{len(rest)} other stages", f"{sum(v for _, v in rest):.3f}"]] if rest else [])
        out += ["", f"Stages of {detailed['label']} batch {detailed['batch']} {detailed['precision']} "
                f"({detailed['compile_s']:.2f} s; the tf2onnx export, cached, is not included):", ""]
        out += _table(["stage", "seconds"], ["---", "---:"], rows)
    return out


def memory_section(rows_in) -> List[str]:
    rows = [[r["label"], str(r["batch"]), f"{'ModelRunner' if r['runtime'] == 'modelrunner' else 'onnxruntime'} {r['precision']}",
             f"{r['file_mb']:.1f}", f"{r['load_s']:.3f}", f"{r['first_run_s']:.3f}", f"{r['warm_run_s']:.3f}",
             f"{r['peak_hwm_mb']:.0f}", f"{r['peak_hwm_mb'] - r['baseline_hwm_mb']:.0f}"] for r in rows_in]
    return (["Each row is a fresh process (`benchmarks/memory_probe.py`): create the runner/session from the file, "
             "run zeros twice. Peak RSS is VmHWM; the model's share is VmHWM minus VmHWM after the imports.", ""]
            + _table(["model", "batch", "runtime", "file MB", "load s", "first run s", "second run s", "peak RSS MB",
                      "model's share MB"], ["---", "---:", "---", "---:", "---:", "---:", "---:", "---:", "---:"], rows))


def profile_section(rows_in, top=5) -> List[str]:
    def ops(by_op, run_us):
        return ", ".join(f"{op} {us / 1e3:.1f} ({100 * us / run_us:.0f} %)" for op, us in list(by_op.items())[:top])
    rows = [[r["label"], str(r["batch"]), f"{r['ours']['run_us'] / 1e3:.1f}", ops(r["ours"]["by_op_us"], r["ours"]["run_us"]),
             f"{r['ours']['dispatch_us']:.0f} µs / {r['ours']['kernel_calls']:.0f} calls",
             f"{r['onnxruntime']['run_us'] / 1e3:.1f}", ops(r["onnxruntime"]["by_op_us"], r["onnxruntime"]["run_us"])]
            for r in rows_in]
    out = ([f"fp32, ms per run and the top {top} op types (ms, share of the run); onnxruntime's names are its fused "
            "kernels (FusedConv = Conv + activation...). Both profilers add their own cost, onnxruntime's much more "
            "on small ops: compare the shares, not the totals with the latency table.", ""]
           + _table(["model", "batch", "ModelRunner ms", "ModelRunner top op types", "ModelRunner dispatch per run",
                     "onnxruntime ms", "onnxruntime top op types"], ["---", "---:", "---:", "---", "---:", "---:", "---"], rows))
    convs = [r for r in rows_in if r["ours"].get("conv_by_kind_us")]
    if convs:
        def kinds(d):
            return ", ".join(f"{k} {us / 1e3:.1f}" for k, us in d.items())
        out += ["", "Convolution time by kind (ms per run; kxk = spatial kernels that are not depthwise):", ""]
        out += _table(["model", "batch", "ModelRunner", "onnxruntime"], ["---", "---:", "---", "---"],
                      [[r["label"], str(r["batch"]), kinds(r["ours"]["conv_by_kind_us"]),
                        kinds(r["onnxruntime"].get("conv_by_kind_us", {}))] for r in convs])
    return out


def markdown(r) -> str:
    out = header(r) + [""]
    for part, error in r.get("errors", {}).items():
        out += [f"**The {part} part failed:** `{error[:400]}`", ""]
    if "peak" in r:
        out += peak_section(r["peak"]) + [""]
    if "cells" in r:
        out += ["### Latency: ModelRunner vs onnxruntime vs TensorFlow", ""] + latency_section(r["cells"], r.get("peak")) + [""]
    if "batching" in r:
        out += ["### Cross-request batching", ""] + batching_section(r["batching"]) + [""]
    if "compile" in r:
        out += ["### Compile time", ""] + compile_section(r["compile"]) + [""]
    if "memory" in r:
        out += ["### PopEF load time and peak resident memory", ""] + memory_section(r["memory"]) + [""]
    if r.get("profile"):
        out += ["### Where the time goes (per-op profiles)", ""] + profile_section(r["profile"]) + [""]
    return "\n".join(out)
