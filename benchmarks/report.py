"""bench_models.py's results as markdown tables (the format of docs/benchmarks.md)."""
from typing import List

import peer_verdict

FP32_MAX_REL = 1e-4     # tests/models/architecture_checks.py's fp32 tolerance (there against TensorFlow)
PEAK_TARGET = 1.10      # target: ResNet50 batch 8 at >= 110 % of the measured sgemm peak (direct-conv FLOPs)


def _table(header: List[str], align: str, rows: List[List[str]]) -> List[str]:
    return ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"] + ["| " + " | ".join(r) + " |" for r in rows]


def _ms(s):
    return "—" if s is None else f"{s['median_ms']:.2f} / {s['p90_ms']:.2f}"


def _worst_error(errors: dict) -> float:
    return max((e["max_rel"] for e in errors.values()), default=float("nan"))


def header(r) -> List[str]:
    m = r["machine"]
    return [f"`{r['command']}` — {m['date_utc']}, {m['cpu']}, {m['cores']} cores, {m['threads']} threads for "
            f"every runtime, onnxruntime {r['versions']['onnxruntime']}, OpenVINO {r['versions'].get('openvino', '—')}, "
            f"TensorFlow {r['versions']['tensorflow']}, "
            f"load average {m['load_average_start'][0]:.1f} at the start, {m.get('load_average_end', [0])[0]:.1f} at "
            f"the end, {r.get('wall_s', 0) / 60:.1f} min" + (" (**--quick: small models, not results**)" if r["quick"] else "")]


def peak_section(p) -> List[str]:
    rows = [[name, f"{s['median_ms']:.1f}", f"{s['median_gflops']:.1f}", f"{s['best_gflops']:.1f}"] for name, s in p["by"].items()]
    return ([f"**Measured sgemm peak: {p['peak_gflops']:.1f} GFLOP/s** ({p['peak_from']}'s median; fp32 MatMul "
             f"{p['n']}×{p['n']} × {p['n']}×{p['n']}, {p['threads']} threads, {p['by'][p['peak_from']]['iterations']} "
             f"interleaved iterations)", ""]
            + _table(["runtime", "median ms", "median GFLOP/s", "best-iteration GFLOP/s"], ["---", "---:", "---:", "---:"], rows))


def latency_section(cells, peak) -> List[str]:
    cells = [c for c in cells if not c.get("failed")]  # failure rows: peers_section
    rows = []
    for c in cells:
        ort16 = _ms(c["onnxruntime_fp16"]) if c["onnxruntime_fp16"] else "does not run"
        ratio = c["ratio_to_onnxruntime"]
        rows.append([c["label"], str(c["batch"]), c["precision"], _ms(c["ours"]), _ms(c["onnxruntime_fp32"]),
                     f"**{ratio:.2f}**", ort16, _ms(c["tensorflow_fp32"]), f"{c['ratio_to_tensorflow']:.2f}",
                     f"{_worst_error(c['errors_vs_onnxruntime_fp32']['ours']):.1e}", str(c["ours"]["iterations"])])
    out = _table(["model", "batch", "precision", "ModelRunner median / p90 ms", "onnxruntime fp32 median / p90 ms",
                  "ratio to onnxruntime", "onnxruntime fp16 median / p90 ms", "TensorFlow fp32 median / p90 ms",
                  "ratio to TensorFlow", "ModelRunner max rel err vs onnxruntime fp32", "iterations"],
                 ["---", "---:", "---", "---:", "---:", "---:", "---:", "---:", "---:", "---:", "---:"], rows)
    out += ["", "onnxruntime alone, for reference (the targets are held against the best peer, above). fp16 rows time "
            "our fp16 PopEF against onnxruntime's fp32 model (the ratio) and its fp16 model where its CPU provider runs it."]
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


def _mode_ms(s):
    return "—" if not s else f"{s['median_ms']:.2f}"


def peers_section(cells) -> List[str]:
    """Our median against onnxruntime and OpenVINO (fp32 models) in both timing modes, the best
    peer figure and the ratio the cell's target applies to; failure rows name the error."""
    rows, failures = [], []
    fp32_ms = {(c["model"], c["batch"]): c["ours"]["median_ms"] for c in cells
               if not c.get("failed") and c["precision"] == "fp32"}
    for c in cells:
        if c.get("failed"):
            if c["precision"] == "fp32":
                failures.append(f"- **{c['label']} batch {c['batch']}: FAILED** — `{c['failed']}`")
            rows.append([c["label"], str(c["batch"]), c["precision"]] + ["—"] * 9 + ["**failed**", "—", "—"])
            continue
        b, v = c.get("blocks") or {}, c["best_peer"]
        limit = peer_verdict.target(c["model"], c["precision"])
        ok = peer_verdict.meets(v["ratio"], limit)
        low = c.get("openvino_low")
        low_as = (c.get("openvino_low_settings") or {}).get("INFERENCE_PRECISION_HINT", "?")
        faster16 = ("✓" if c["ours"]["median_ms"] < fp32_ms[(c["model"], c["batch"])] else "✗") \
            if c["precision"] == "fp16" else ""
        by_mode = ", ".join(f"{m} {r:.2f}" for m, r in v["by_mode"].items())
        rows.append([c["label"], str(c["batch"]), c["precision"],
                     _mode_ms(c["ours"]), _mode_ms(b.get(f"ModelRunner {c['precision']}")),
                     _mode_ms(c["onnxruntime_fp32"]), _mode_ms(b.get("onnxruntime fp32")),
                     _mode_ms(c.get("openvino_fp32")) if c.get("openvino_fp32") else "does not run",
                     _mode_ms(b.get("OpenVINO fp32")),
                     f"{_mode_ms(low)} ({low_as})" if low else "—",
                     f"{v['peer']} ({v['peer_mode']}) {v['peer_ms']:.2f}",
                     f"**{v['ratio']:.2f}** ({by_mode})",
                     "—" if limit is None else f"≤ {limit:.2f} {'✓' if ok else '✗'}", faster16])
    out = _table(["model", "batch", "precision", "ours interleaved", "ours blocks", "onnxruntime fp32 interleaved",
                  "onnxruntime fp32 blocks", "OpenVINO fp32 interleaved", "OpenVINO fp32 blocks",
                  "OpenVINO fp16 hint (runs as)", "best peer (mode) ms", "ratio to best peer (by mode)", "target",
                  "fp16 faster than fp32"],
                 ["---", "---:", "---"] + ["---:"] * 7 + ["---", "---:", "---", "---"], rows)
    out += ["", "Median ms. Interleaved: every contender once per iteration, rotated, 5 ms apart, onnxruntime's "
            "spinning off. Blocks: consecutive runs of one runtime, then the next, rotated over the rounds, each "
            "peer at its defaults (onnxruntime spinning on); each block's first runs (≥ 1, 100 ms) untimed. The ratio is our "
            "better median over the two modes to the best fp32 peer median in either mode (per mode: ours / "
            "that mode's best peer). Targets: the tuned networks ≤ "
            f"{peer_verdict.TUNED_TARGET} in every cell, the other families ≤ {peer_verdict.FAMILY_TARGET} in "
            "fp32. The OpenVINO fp16-hint column is information, not a peer: the precision it resolved to is in "
            "brackets."]
    sample = next((c for c in cells if c.get("openvino_settings")), None)
    if sample:
        out += ["", "OpenVINO CPU plugin settings as compiled: " + ", ".join(
            f"{k}={v}" for k, v in sample["openvino_settings"].items()) + "."]
    blocks = next((c["blocks"] for c in cells if c.get("blocks")), None)
    if blocks:
        runs = sorted({c["blocks"]["_runs_per_block"] for c in cells if c.get("blocks")})
        out += [f"Blocks: {blocks['_rounds']} rounds, {'/'.join(map(str, runs))} timed runs per block (fewer on "
                "the slower cells, to fit the time budget)."]
    errors = {(c["label"], c["batch"], c["precision"]): c for c in cells if not c.get("failed")}
    wrong = [f"{label} b{batch} {p}: max rel {_worst_error(c['errors_vs_onnxruntime_fp32']['ours']):.1e}"
             for (label, batch, p), c in errors.items()
             if p == "fp32" and _worst_error(c["errors_vs_onnxruntime_fp32"]["ours"]) > FP32_MAX_REL]
    out += ["", f"fp32 outputs vs onnxruntime fp32 above {FP32_MAX_REL:.0e} max rel: "
            + ("; ".join(wrong) if wrong else "none") + "."]
    ov = [f"{label} b{batch}: {_worst_error(c['errors_vs_onnxruntime_fp32']['openvino_fp32']):.1e}"
          for (label, batch, p), c in errors.items()
          if p == "fp32" and "openvino_fp32" in c["errors_vs_onnxruntime_fp32"]]
    if ov:
        out += ["OpenVINO fp32 max rel error vs onnxruntime fp32: " + "; ".join(ov) + "."]
    peer_failures = sorted({f"{k}: `{v}`" for c in cells for k, v in (c.get("peer_errors") or {}).items()})
    out += [f"Peer does not run: {f}" for f in peer_failures]
    return out + ([""] + failures if failures else [])


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
    rows = [[c["label"], str(c["batch"]), c["precision"],
             f"**failed**: `{c['failed']}`" if c.get("failed") else
             "reused" if c["compile_s"] is None else f"{c['compile_s']:.2f}"] for c in compiles]
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


def op_class_section(rows_in, top=8) -> List[str]:
    """Per model and batch, our profiled time per op class against onnxruntime's and OpenVINO's,
    the ratios, and the classes flagged above the limit."""
    out = [f"fp32, profiled ms per run by op class (op_classes.py); ✗ marks a class above "
           f"{peer_verdict.OP_CLASS_LIMIT}× the peer's time for it that holds ≥ {peer_verdict.OP_CLASS_MIN_SHARE:.0%} "
           "of our run. A peer's kernels are charged to the class of the step of ours that computes their "
           "ONNX nodes (the peer's Sigmoid and Mul of a swish we fused into a convolution count in that "
           "convolution's class; the peer's own reorders keep their class); \"charged\" is the peer time so "
           "moved out of its kernels' own classes. A class a peer shows no time for was fused by it into a "
           f"neighbour. The top {top} classes of ours and every flagged one are listed.", ""]
    for r in rows_in:
        if r.get("failed"):
            out += [f"**{r['label']} batch {r['batch']}**: failed — `{r['failed']}`", ""]
            continue
        peers = [p for p in ("onnxruntime", "OpenVINO") if "by_class_us" in r.get(p, {})]
        totals = [f"ModelRunner {r['ours']['run_us'] / 1e3:.2f}"] + [f"{p} {r[p]['run_us'] / 1e3:.2f}" for p in peers]
        totals += [f"{p} charged to our classes {r[p]['charged_to_our_classes_us'] / 1e3:.2f}" for p in peers
                   if "charged_to_our_classes_us" in r[p]]
        if "error" in r.get("OpenVINO", {}):
            totals.append(f"OpenVINO failed: `{r['OpenVINO']['error']}`")
        rows = []
        for i, c in enumerate(r["classes"]):
            if i >= top and not c["flagged"]:
                continue
            cells = [c["class"], f"{c['ours_us'] / 1e3:.2f}", f"{100 * c['share']:.0f} %"]
            for p in peers:
                ratio = c["ratios"].get(p)
                cells += [f"{c['peers_us'][p] / 1e3:.2f}",
                          "—" if ratio is None else f"{ratio:.2f}" + (" ✗" if p in c["flagged"] else "")]
            rows.append(cells)
        flagged = [c["class"] + " (" + ", ".join(f"{p} {c['ratios'][p]:.1f}×" for p in c["flagged"]) + ")"
                   for c in r["classes"] if c["flagged"]]
        out += [f"**{r['label']} batch {r['batch']}** — profiled run ms: {', '.join(totals)}. Flagged: "
                + (", ".join(flagged) if flagged else "none"), ""]
        out += _table(["op class", "ours ms", "share"] + [x for p in peers for x in (f"{p} ms", "ratio")],
                      ["---", "---:", "---:"] + ["---:"] * (2 * len(peers)), rows) + [""]
    return out


def profile_section(rows_in, top=5) -> List[str]:
    rows_in = [r for r in rows_in if not r.get("failed")]
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
        out += ["### Latency against the best peer: onnxruntime and OpenVINO, interleaved and in blocks", ""]
        out += peers_section(r["cells"]) + [""]
        out += ["### Latency: ModelRunner vs onnxruntime vs TensorFlow (interleaved)", ""] + latency_section(r["cells"], r.get("peak")) + [""]
    if "batching" in r:
        out += ["### Cross-request batching", ""] + batching_section(r["batching"]) + [""]
    if "compile" in r:
        out += ["### Compile time", ""] + compile_section(r["compile"]) + [""]
    if "memory" in r:
        out += ["### PopEF load time and peak resident memory", ""] + memory_section(r["memory"]) + [""]
    if r.get("profile"):
        out += ["### Where the time goes (per-op profiles)", ""] + profile_section(r["profile"]) + [""]
        out += ["### Op classes against the peers", ""] + op_class_section(r["profile"]) + [""]
    return "\n".join(out)
