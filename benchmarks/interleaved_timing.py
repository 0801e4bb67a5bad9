"""Times several implementations of the same computation iteration by iteration, so that all of
them see the same machine noise (the benchmark machines are shared), and summarises them.

Each iteration runs every contender once, in an order rotated by one each iteration (whoever
runs after whom is spread evenly), with a short pause before each call: every runtime's
intra-op workers spin for a while after a call (ours 200 µs, onnxruntime's and TensorFlow's
similar), and without the pause that spinning would steal the next contender's cores.
"""
import time
from typing import Callable, Dict, List

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


def summary(seconds: List[float]) -> Dict[str, float]:
    a = np.asarray(seconds) * 1e3
    return {"median_ms": float(np.median(a)), "p90_ms": float(np.percentile(a, 90)),
            "p99_ms": float(np.percentile(a, 99)), "min_ms": float(a.min()), "iterations": int(a.size)}
