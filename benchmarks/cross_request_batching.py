"""Throughput of batch-1 requests, for bench_models.py:

- "batch-8 model, dynamic batching, N clients": N threads each send their share of the requests
  back to back to one ModelRunner over the model compiled at batch 8 with batching_dim=0; the
  runtime packs rows of concurrent requests into shared batches (a batch that does not fill
  runs zero-padded after `timeout`).
- "batch-1 model, sequential": one thread, the model compiled at batch 1, batching off.
- "batch-8 model, padded, sequential": one thread, each request zero-padded to 8 rows by the
  client, batching off (what serving one request on a batch-8 executable costs without
  batching).

Every configuration runs `rounds` times, in rotated order; throughput is the median over the
rounds, latencies are pooled over all requests of all rounds.
"""
import threading
import time
from typing import Dict, List

import numpy as np


def _clients(runner, feed_row, n_requests: int, n_threads: int, pad_to: int = 0):
    """(wall seconds, per-request latencies) of n_threads threads sending n_requests in total."""
    (anchor,) = runner.get_execute_inputs()
    outputs = runner.get_execute_outputs()
    per_thread = n_requests // n_threads
    latencies: List[List[float]] = [[] for _ in range(n_threads)]
    errors = []
    barrier = threading.Barrier(n_threads + 1)

    def client(i):
        x = feed_row
        if pad_to:
            x = np.zeros((pad_to,) + feed_row.shape[1:], feed_row.dtype)
            x[:1] = feed_row
        feed = {anchor.name: x}
        rows = x.shape[0]
        outs = {o.name: np.zeros((rows,) + tuple(o.shape[1:]), o.numpy_data_type()) for o in outputs}
        barrier.wait()
        try:
            for _ in range(per_thread):
                t0 = time.perf_counter()
                runner.execute(feed, outs)
                latencies[i].append(time.perf_counter() - t0)
        except Exception as e:  # reported by the caller, with the configuration
            errors.append(e)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    if errors:
        raise errors[0]
    return wall, [s for per in latencies for s in per]


def measure(executable_b1, executable_b8, x_row: np.ndarray, client_counts, n_requests: int, rounds: int,
            timeout_us: int) -> Dict[str, dict]:
    from tf_popef_op.runtime import ModelRunner, RuntimeConfig
    dynamic = ModelRunner(executable_b8, RuntimeConfig(batching_dim=0, timeout_ns=timeout_us * 1000))
    single = ModelRunner(executable_b1, RuntimeConfig())
    padded = ModelRunner(executable_b8, RuntimeConfig())
    dtype = dynamic.get_execute_inputs()[0].numpy_data_type()
    row = np.ascontiguousarray(x_row[:1].astype(dtype))

    configs = {"batch-1 model, sequential": (single, 1, 0),
               "batch-8 model, padded, sequential": (padded, 1, 8)}
    for n in client_counts:
        configs[f"batch-8 model, dynamic batching, {n} client{'s' if n > 1 else ''}"] = (dynamic, n, 0)
    for runner, _, pad in configs.values():  # warm-up: first-touch of arenas, pool start
        _clients(runner, row, 2, 1, pad)

    walls = {name: [] for name in configs}
    lats = {name: [] for name in configs}
    stats_before = dynamic.stats()
    names = list(configs)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            runner, n_threads, pad = configs[name]
            wall, latencies = _clients(runner, row, n_requests - n_requests % n_threads, n_threads, pad)
            walls[name].append((len(latencies), wall))
            lats[name].extend(latencies)
    stats_after = dynamic.stats()

    results = {}
    for name in names:
        a = np.asarray(lats[name]) * 1e3
        results[name] = {"clients": configs[name][1], "requests_per_s": float(np.median([n / w for n, w in walls[name]])),
                         "p50_ms": float(np.percentile(a, 50)), "p99_ms": float(np.percentile(a, 99)),
                         "requests": int(a.size)}
    results["_dynamic_runner_stats"] = {k: stats_after[k] - stats_before[k]
                                        for k in ("requests", "batches_run", "padded_rows", "multi_request_batches")}
    results["_timeout_us"] = timeout_us
    return results
