"""Times several implementations of the same computation iteration by iteration, so that all of
them see the same machine noise (the benchmark machines are shared), and summarises them.

Each iteration runs every contender once, in an order rotated by one each iteration (whoever
runs after whom is spread evenly), with a short pause before each call: every runtime's
intra-op workers spin for a while after a call (ours 200 µs, onnxruntime's and TensorFlow's
similar), and without the pause that spinning would steal the next contender's cores.
"""
import time
from typing import Callable, Dict, List, Tuple

import numpy as np


def interleaved(contenders: Dict[str, Callable[[], object]], warmup: int, min_iters: int, max_iters: int,
                budget_s: float, gap_s: float = 0.005) -> Dict[str, List[float]]:
    """Seconds per call of each contender: at least min_iters iterations, then more until
    budget_s has passed (at most max_iters). `warmup` untimed iterations run first."""
    names = list(contenders)
    for _ in range(warmup):
        for name in names:
            contenders[name]()
    samples = {name: [] for name in names}
    start = time.perf_counter()
    iteration = 0
    while iteration < max_iters and (iteration < min_iters or time.perf_counter() - start < budget_s):
        shift = iteration % len(names)
        for name in names[shift:] + names[:shift]:
            time.sleep(gap_s)
            t0 = time.perf_counter()
            contenders[name]()
            samples[name].append(time.perf_counter() - t0)
        iteration += 1
    return samples


def warm_median(call: Callable[[], object], runs: int) -> float:
    """Median seconds per call of `runs` timed calls, after `runs` untimed ones (a process of
    its own timing one contender: nothing to interleave with)."""
    for _ in range(runs):
        call()
    seconds = []
    for _ in range(runs):
        t0 = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - t0)
    return float(np.median(seconds))


def summary(seconds: List[float]) -> Dict[str, float]:
    a = np.asarray(seconds) * 1e3
    return {"median_ms": float(np.median(a)), "p90_ms": float(np.percentile(a, 90)),
            "p99_ms": float(np.percentile(a, 99)), "min_ms": float(a.min()), "iterations": int(a.size)}


def block_schedule(names: List[str], runs: int, rounds: int) -> List[Tuple[str, int]]:
    """The order of block timing: `rounds` rounds, each a block of `runs` consecutive calls of
    every contender, the order rotated by one each round (no contender always follows the same
    one)."""
    order = []
    for r in range(rounds):
        shift = r % len(names)
        order += [(name, runs) for name in names[shift:] + names[:shift]]
    return order


def runs_per_block(seconds_per_call: Dict[str, float], rounds: int, budget_s: float, max_runs: int = 20,
                   min_runs: int = 5) -> int:
    """As many runs per block (at most max_runs) as fit `budget_s` for all rounds, given each
    contender's estimated seconds per call; never fewer than min_runs."""
    per_run_of_all = sum(seconds_per_call.values()) * rounds
    fit = int(budget_s / per_run_of_all) if per_run_of_all > 0 else max_runs
    return max(min_runs, min(max_runs, fit))


def blocks(contenders: Dict[str, Callable[[], object]], runs: int, rounds: int,
           discard: int = 1, settle_s: float = 0.1) -> Dict[str, List[float]]:
    """Seconds per call of each contender timed in blocks of consecutive calls (block_schedule),
    each runtime at its own settings: nothing else runs between the calls of a block, so a
    runtime's spinning workers help it rather than slow a neighbour. Every block starts with
    untimed calls, at least `discard` of them and until `settle_s` has passed: the block before
    left the caches, and its spinning workers the cores, to another runtime (onnxruntime's
    workers spin on for ~50 ms after its last call: the next runtime's first three calls measured
    43, 24 and 18 ms on ViT-Tiny b1 against 15.5 after OpenVINO's block)."""
    samples = {name: [] for name in contenders}
    for name, count in block_schedule(list(contenders), runs, rounds):
        start, settled = time.perf_counter(), 0
        while settled < discard or time.perf_counter() - start < settle_s:
            contenders[name]()
            settled += 1
        for _ in range(count):
            t0 = time.perf_counter()
            contenders[name]()
            samples[name].append(time.perf_counter() - t0)
    return samples
