"""Two runtime configurations against each other on cached PopEFs: two checkouts (each built in
place) or one checkout under two environments (e.g. TF_POPEF_MMAP_WEIGHTS=0, the weights copied
into device memory, against their file mmap). Each round runs one process per side, which
loads every cell's PopEF, runs it `--warmup` times untimed and `--runs` times timed; the sides
alternate (which goes first swaps every round). Prints the median over rounds of each cell's
median ms, the load time, and the process's resident and AnonHugePages memory after the cell.
--per-run also prints every timed run as `ms/other` (other: CPU ms the machine spent outside
the timing process during that run, from /proc/stat, steal included), which tells a run slowed by
another process from one slowed by the machine's state.

    .venv/bin/python benchmarks/compare_device_memory.py OLD NEW [--old-env K=V] [--new-env K=V] \
        --cells inception_v3:8:fp32 resnet50:1:fp16 ... [--rounds 4] [--runs 20] [--warmup 3]

The PopEFs are `<model>-*-b<batch>-<precision>.popef` in $TF_POPEF_BENCH_CACHE or
benchmarks/.cache (the runtime's change must not need recompiling). OLD and NEW may be the same
checkout when the environments differ.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time

import numpy as np

CACHE = os.environ.get("TF_POPEF_BENCH_CACHE") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), ".cache")


def _popef(cell: str) -> str:
    model, batch, precision = cell.split(":")
    found = sorted(glob.glob(os.path.join(CACHE, f"{model}-*-b{batch}-{precision}.popef")))
    if not found:
        raise SystemExit(f"no cached PopEF for {cell} in {CACHE}: run `bench_models.py --parts compile` first")
    return found[0]


def _memory_mib() -> dict:
    """The process's resident and AnonHugePages memory, MiB."""
    out = {}
    with open(f"/proc/{os.getpid()}/smaps_rollup") as f:
        for line in f:
            key = line.split(":")[0]
            if key in ("Rss", "AnonHugePages"):
                out[key] = int(line.split()[1]) / 1024
    return out


def _busy_seconds() -> float:
    """CPU seconds the whole machine has been busy (all but idle and iowait; steal counts)."""
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    t = os.times()
    return t.user + t.system


def _time(cells, warmup: int, runs: int) -> None:
    """In the side's process: print {cell: {ms, load_ms, rss_mib, huge_mib}} as JSON."""
    from tf_popef_op import runtime
    result = {}
    for cell in cells:
        config = runtime.RuntimeConfig()
        config.batching_dim, config.timeout_ns = 0, 0
        start = time.perf_counter()
        runner = runtime.ModelRunner(_popef(cell), config)
        load_ms = (time.perf_counter() - start) * 1e3
        rng = np.random.default_rng(0)
        feeds = {i.name: rng.standard_normal(i.shape).astype(i.numpy_data_type())
                 for i in runner.get_execute_inputs()}
        for _ in range(warmup):
            runner.execute(feeds)
        seconds, other = [], []
        for _ in range(runs if cell.split(":")[1] == "1" else max(3, runs // 2)):
            busy, own = _busy_seconds(), _own_seconds()
            start = time.perf_counter()
            runner.execute(feeds)
            seconds.append(time.perf_counter() - start)
            other.append(max(0.0, _busy_seconds() - busy - (_own_seconds() - own)))
        memory = _memory_mib()
        result[cell] = {"ms": float(np.median(seconds) * 1e3), "load_ms": load_ms,
                        "rss_mib": memory["Rss"], "huge_mib": memory["AnonHugePages"],
                        "runs": [f"{t * 1e3:.0f}/{o * 1e3:.0f}" for t, o in zip(seconds, other)]}
        runner.close()
    print(json.dumps(result))


def _run(checkout: str, env: dict, args) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--warmup", str(args.warmup),
           "--runs", str(args.runs), "--cells", *args.cells]
    done = subprocess.run(cmd, cwd=checkout, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=checkout, TF_CPP_MIN_LOG_LEVEL="2", **env))
    if done.returncode != 0:
        raise SystemExit(f"{checkout}: failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _env(pairs) -> dict:
    return dict(p.split("=", 1) for p in pairs or [])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkouts", nargs="*", help="OLD and NEW checkouts (may be the same one)")
    parser.add_argument("--old-env", nargs="*", default=[], metavar="K=V")
    parser.add_argument("--new-env", nargs="*", default=[], metavar="K=V")
    parser.add_argument("--cells", nargs="+", required=True, help="model:batch:precision, e.g. resnet50:8:fp32")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--runs", type=int, default=20, help="timed runs per cell (half at batch > 1)")
    parser.add_argument("--per-run", action="store_true", help="print every timed run as ms/other-CPU-ms")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        sys.path.insert(0, os.getcwd())
        _time(args.cells, args.warmup, args.runs)
        return
    if len(args.checkouts) != 2:
        parser.error("give the OLD and the NEW checkout")
    sides = [("old", args.checkouts[0], _env(args.old_env)), ("new", args.checkouts[1], _env(args.new_env))]
    if sides[0][1:] == sides[1][1:]:
        parser.error("OLD and NEW are the same checkout under the same environment")
    for cell in args.cells:
        _popef(cell)  # a missing PopEF fails here
    rounds = {"old": [], "new": []}
    for r in range(args.rounds):
        for name, checkout, env in sides[::1 if r % 2 == 0 else -1]:
            rounds[name].append(_run(checkout, env, args))
    print(f"old: {args.checkouts[0]} {' '.join(args.old_env)}\nnew: {args.checkouts[1]} {' '.join(args.new_env)}\n"
          f"{args.rounds} rounds, load average {os.getloadavg()[0]:.1f}\n")
    print("| cell | old ms | new ms | new/old | per-round new/old | old / new load ms | "
          "old / new RSS MiB | old / new AnonHugePages MiB |")
    print("|---|---:|---:|---:|---|---:|---:|---:|")
    for cell in args.cells:
        med = {s: {k: float(np.median([r[cell][k] for r in rounds[s]])) for k in rounds[s][0][cell] if k != "runs"}
               for s in rounds}
        per_round = " ".join(f"{n[cell]['ms'] / o[cell]['ms']:.2f}" for o, n in zip(rounds["old"], rounds["new"]))
        print(f"| {cell} | {med['old']['ms']:.2f} | {med['new']['ms']:.2f} | {med['new']['ms'] / med['old']['ms']:.2f} | "
              f"{per_round} | {med['old']['load_ms']:.0f} / {med['new']['load_ms']:.0f} | "
              f"{med['old']['rss_mib']:.0f} / {med['new']['rss_mib']:.0f} | "
              f"{med['old']['huge_mib']:.0f} / {med['new']['huge_mib']:.0f} |")
    if args.per_run:
        print("\nEvery timed run, ms/other (CPU ms spent outside the timing process), in the order run:")
        for r in range(args.rounds):
            for name, _, _ in sides[::1 if r % 2 == 0 else -1]:
                for cell in args.cells:
                    print(f"round {r} {name} {cell}: {' '.join(rounds[name][r][cell]['runs'])}")


if __name__ == "__main__":
    main()
