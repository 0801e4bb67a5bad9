"""Per-op profile tables from ``ModelRunner.profile()``.

Profiling is on when the runner was created with ``RuntimeConfig(profile=True)`` (default:
``TF_POPEF_PROFILE=1``) or after ``runner.profiling = True``. ``runner.profile()`` returns one
dict per kernel step that ran: ``program, step, op, node, calls, total_us, mean_us``;
``runner.profile_summary()`` adds the run totals (``dispatch_us`` = run time not spent in
kernels); ``runner.reset_profile()`` starts over.

    runner = ModelRunner("model.popef", RuntimeConfig(profile=True))
    for _ in range(100):
        runner.execute(feeds)
    print(format_profile(runner.profile(), runner.profile_summary()))
"""
from typing import Dict, List, Optional, Sequence


def profile_by_op(entries: Sequence[dict]) -> List[dict]:
    """Aggregates step entries per op type: op, steps, calls, total_us, mean_us (per call),
    sorted by total time, largest first."""
    by_op: Dict[str, dict] = {}
    for e in entries:
        agg = by_op.setdefault(e["op"], {"op": e["op"], "steps": 0, "calls": 0, "total_us": 0.0})
        agg["steps"] += 1
        agg["calls"] += e["calls"]
        agg["total_us"] += e["total_us"]
    rows = sorted(by_op.values(), key=lambda r: r["total_us"], reverse=True)
    for r in rows:
        r["mean_us"] = r["total_us"] / r["calls"] if r["calls"] else 0.0
    return rows


def format_profile(entries: Sequence[dict], summary: Optional[dict] = None, top: Optional[int] = 20) -> str:
    """A plain-text report: the `top` steps by total time, then every op type, then (given the
    summary) the run totals. Times per run are total time / number of profiled runs."""
    entries = list(entries)
    runs = (summary or {}).get("runs") or (max((e["calls"] for e in entries), default=0))
    total = sum(e["total_us"] for e in entries) or 1.0
    lines = []
    steps = sorted(entries, key=lambda e: e["total_us"], reverse=True)
    shown = steps if top is None else steps[:top]
    lines.append(f"per step ({len(shown)} of {len(entries)} by total time, {runs} run(s)):")
    lines.append(f"{'op':<22} {'node':<40} {'calls':>8} {'us/run':>10} {'us/call':>10} {'%':>6}")
    for e in shown:
        per_run = e["total_us"] / runs if runs else 0.0
        lines.append(f"{e['op']:<22.22} {e['node']:<40.40} {e['calls']:>8} {per_run:>10.2f} {e['mean_us']:>10.3f} "
                     f"{100 * e['total_us'] / total:>6.1f}")
    lines.append("")
    lines.append("per op type:")
    lines.append(f"{'op':<22} {'steps':>6} {'calls':>8} {'us/run':>10} {'us/call':>10} {'%':>6}")
    for r in profile_by_op(entries):
        per_run = r["total_us"] / runs if runs else 0.0
        lines.append(f"{r['op']:<22.22} {r['steps']:>6} {r['calls']:>8} {per_run:>10.2f} {r['mean_us']:>10.3f} "
                     f"{100 * r['total_us'] / total:>6.1f}")
    if summary and summary.get("runs"):
        n = summary["runs"]
        lines.append("")
        lines.append(f"per run: {summary['run_us'] / n:.2f} us total, {summary['kernel_us'] / n:.2f} us in "
                     f"{summary['kernel_calls'] / n:.0f} kernel call(s), {summary['dispatch_us'] / n:.2f} us dispatch "
                     f"({summary['dispatch_us'] / max(summary['kernel_calls'], 1) * 1e3:.0f} ns per call)")
    return "\n".join(lines)
