"""Layer by layer: where does ModelRunner lose (or win) time against onnxruntime on a model?

Runs the model's PopEF with the runtime's profiler (RuntimeConfig(profile=True)) and the standard
ONNX model (model_suite.standard_onnx: our converter without our fusions) with onnxruntime's
profiler, at the same intra-op thread count, and lines up the two per ONNX node:
- our steps keep the name of the ONNX node they run (a FusedConv the name of its Conv);
- onnxruntime keeps node names too, except the nodes its NCHWc transformer rewrites, which it
  names after their output tensor plus "_nchwc" — after the last node it fused (Conv + Clip is
  named after the Clip's output), so a node we do not have is traced back through the
  elementwise nodes above it to the one we do (the Conv).
Steps that only one side has (our fused elementwise chains, onnxruntime's layout reorders) are
listed apart. Times are per run: our mean over the profiled runs, onnxruntime's median.

    .venv/bin/python benchmarks/compare_layers.py MODEL.onnx --popef MODEL.popef [--batch N]
        [--threads T] [--ort-level all|extended] [--iters 50] [--json out.json]

Without --popef the model is compiled first (CompilerOptions(batch_size=N)). `--ort-level
extended` stops onnxruntime short of its NCHWc layout (plain NCHW kernels, like ours).
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
from collections import defaultdict
from typing import Dict, List

import numpy as np
import onnx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

NCHWC_SUFFIX = "_nchwc"


# Ops onnxruntime fuses into the node before them (activations, the residual Add).
FUSED_AFTER = {"Relu", "Clip", "Sigmoid", "Mul", "Add", "Sum", "LeakyRelu", "HardSigmoid", "Tanh"}


def onnx_node_resolver(model: onnx.ModelProto, ours: set):
    """A function mapping an onnxruntime profile node name to the ONNX node (one of ours where
    possible) it stands for, or "" (an onnxruntime-only node such as a layout reorder). The
    graph's name and producer maps are built once, here."""
    nodes = {n.name: n for n in model.graph.node}
    producers = {out: n.name for n in model.graph.node for out in n.output}

    def resolve(ort_node: str) -> str:
        if ort_node in nodes:
            name = ort_node
        elif ort_node.endswith(NCHWC_SUFFIX):
            name = producers.get(ort_node[:-len(NCHWC_SUFFIX)], "")
        else:
            return ""
        frontier = [name] if name else []
        for _ in range(4):  # Conv -> Add -> Clip at most, in practice
            for candidate in frontier:
                if candidate in ours:
                    return candidate
            frontier = [producers[i] for c in frontier if nodes[c].op_type in FUSED_AFTER
                        for i in nodes[c].input if i in producers]
        return name

    return resolve


def ort_node_times(events: List[dict]) -> Dict[str, dict]:
    """Median kernel time (µs) per onnxruntime node from its profile events, and its op type."""
    durations, ops = defaultdict(list), {}
    for e in events:
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
            name = e["name"][:-len("_kernel_time")]
            durations[name].append(float(e["dur"]))
            ops[name] = e.get("args", {}).get("op_name", "?")
    return {n: {"op": ops[n], "us": statistics.median(d)} for n, d in durations.items()}


def match_layers(model: onnx.ModelProto, ours: List[dict], runs: int, ort: Dict[str, dict]) -> dict:
    """Rows per ONNX node in our step order: {node, ours_op, ours_us, ort_op, ort_us}, plus the
    steps only we have and the nodes only onnxruntime has. `ours`: ModelRunner.profile() entries
    of the main program over `runs` runs; `ort`: ort_node_times()."""
    onnx_node_of = onnx_node_resolver(model, {e["node"] for e in ours})
    ort_by_onnx, ort_only = defaultdict(list), []
    for name, t in ort.items():
        target = onnx_node_of(name)
        if target:
            ort_by_onnx[target].append((name, t))
        else:
            ort_only.append({"node": name, **t})
    rows, ours_only = [], []
    for e in sorted(ours, key=lambda e: (e["program"] != "main", e["step"])):
        us = e["total_us"] / max(1, runs)
        matched = ort_by_onnx.pop(e["node"], None)
        if matched is None:
            ours_only.append({"node": e["node"], "op": e["op"], "us": us})
            continue
        rows.append({"node": e["node"], "ours_op": e["op"], "ours_us": us,
                     "ort_op": "+".join(t["op"] for _, t in matched), "ort_us": sum(t["us"] for _, t in matched)})
    # ONNX nodes onnxruntime ran separately that our steps fused away (their node names are gone)
    for target, matched in ort_by_onnx.items():
        ort_only.extend({"node": name, **t} for name, t in matched)
    return {"rows": rows, "ours_only": ours_only, "ort_only": ort_only}


def format_report(report: dict, top: int = 0) -> str:
    rows = report["rows"]
    ours_total = sum(r["ours_us"] for r in rows) + sum(r["us"] for r in report["ours_only"])
    ort_total = sum(r["ort_us"] for r in rows) + sum(r["us"] for r in report["ort_only"])
    lines = [f"total per run: ModelRunner {ours_total:.1f} µs, onnxruntime {ort_total:.1f} µs "
             f"(ratio {ours_total / max(ort_total, 1e-9):.2f})", "",
             f"{'node':48s} {'ours op':18s} {'ours µs':>9s} {'ort op':14s} {'ort µs':>9s} {'ratio':>6s} {'lost µs':>8s}"]
    shown = sorted(rows, key=lambda r: r["ours_us"] - r["ort_us"], reverse=True)[:top] if top else rows
    for r in shown:
        lines.append(f"{r['node'][-48:]:48s} {r['ours_op'][:18]:18s} {r['ours_us']:9.1f} {r['ort_op'][:14]:14s} "
                     f"{r['ort_us']:9.1f} {r['ours_us'] / max(r['ort_us'], 1e-9):6.2f} {r['ours_us'] - r['ort_us']:8.1f}")
    for title, items in (("only in ModelRunner", report["ours_only"]), ("only in onnxruntime", report["ort_only"])):
        by_op = defaultdict(float)
        for it in items:
            by_op[it["op"]] += it["us"]
        lines.append(f"\n{title}: " + (", ".join(f"{op} {us:.1f} µs" for op, us in
                                                  sorted(by_op.items(), key=lambda kv: -kv[1])) or "nothing"))
    by_op = defaultdict(lambda: [0.0, 0.0])
    for r in rows:
        by_op[r["ours_op"]][0] += r["ours_us"]
        by_op[r["ours_op"]][1] += r["ort_us"]
    lines.append("\nmatched layers per op (ours µs / onnxruntime µs): " +
                 ", ".join(f"{op} {a:.0f}/{b:.0f}" for op, (a, b) in sorted(by_op.items(), key=lambda kv: -kv[1][0])))
    return "\n".join(lines)


def profile_onnxruntime(model: onnx.ModelProto, feeds: Dict[str, np.ndarray], threads: int, level: str,
                        iters: int, warmup: int) -> Dict[str, dict]:
    import onnxruntime as ort
    from onnxruntime_peer import cpu_session
    opt = {"all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
           "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED}[level]
    with tempfile.TemporaryDirectory() as tmp:
        session = cpu_session(model, threads, opt, profile_prefix=os.path.join(tmp, "ort"))
        for _ in range(warmup):
            session.run(None, feeds)
        # The profile covers the warm-up runs too; the median per node ignores them.
        for _ in range(iters):
            session.run(None, feeds)
        with open(session.end_profiling()) as f:
            return ort_node_times(json.load(f))


def compare_model(model: onnx.ModelProto, popef, batch: int, ort_level: str = "all", iters: int = 50,
                  warmup: int = 5) -> dict:
    """match_layers() of one profiled run series each: `popef` (a path or executable) on
    ModelRunner, standard_onnx(model) on onnxruntime with as many threads as the runtime's pool."""
    from tf_popef_op import runtime
    from tf_popef_op.runtime import ModelRunner, RuntimeConfig
    from model_suite import standard_onnx
    from profile_model import profiled_runs, random_feeds

    standard = standard_onnx(model, batch, "fp32")
    with ModelRunner(popef, RuntimeConfig(profile=True)) as runner:
        feeds = random_feeds(runner, batch, np.random.default_rng(0))
        profiled_runs(runner, feeds, iters, warmup)
        ours = runner.profile()
    ort_times = profile_onnxruntime(standard, feeds, runtime.num_threads(), ort_level, iters, warmup)
    return match_layers(standard, ours, iters, ort_times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="the ONNX model (as exported: this script applies standard_onnx)")
    ap.add_argument("--popef", help="its compiled PopEF (default: compile the model now)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=None, help="intra-op threads of both (default: "
                    "TF_POPEF_NUM_THREADS or the cores; set before the runtime loads)")
    ap.add_argument("--ort-level", choices=["all", "extended"], default="all")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--top", type=int, default=0, help="list only the N layers that lose the most time")
    ap.add_argument("--json", help="also write the matched rows to this file")
    args = ap.parse_args()
    if args.threads is not None:
        os.environ["TF_POPEF_NUM_THREADS"] = str(args.threads)

    from tf_popef_op import runtime
    from profile_model import load_popef

    model = onnx.load(args.model)
    report = compare_model(model, args.popef or load_popef(args.model, args.batch), args.batch, args.ort_level,
                           args.iters, args.warmup)
    threads = runtime.num_threads()
    print(f"# {args.model} batch {args.batch}: {threads} intra-op threads, onnxruntime at ORT_ENABLE_"
          f"{args.ort_level.upper()}, {args.iters} profiled runs each\n")
    print(format_report(report, args.top))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "threads": threads, "ort_level": args.ort_level, **report}, f, indent=1)


if __name__ == "__main__":
    main()
