"""Runtime overheads of the emulator: what a request and an op cost besides the math.

* round trip: a synchronous `ModelRunner.execute` of a one-op model (X + Y, one float32 each)
  with caller-provided outputs: Python -> queue -> device thread -> completion -> Python;
* per-op dispatch: a chain of N one-element ops (alternating Add with a weight and Relu), timed
  against a chain of 1 op; (t_N - t_1) / (N - 1) is what one more op costs the runtime,
  the (tiny) kernel included. The profiler's per-op kernel time is reported beside it;
* the profiler's own cost (RuntimeConfig(profile=True)) on the same chain, and its split of a
  run into kernel time and the runtime's own dispatch time (run time - kernel time, per op).

The round trip is measured with the default RuntimeConfig.spin_ns (waiting threads spin briefly
before sleeping) and with spin_ns=0 (always sleep on a condition variable), interleaved.

The models are written by hand with the PopEF writer (not the compiler), so converter fusions
cannot merge the chain into one op.

    .venv/bin/python benchmarks/bench_runtime_overhead.py [--ops 200] [--iters 20000]
"""
import argparse
import os
import platform
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from popef.format import BlobType  # noqa: E402
from popef.writer import encode_popef, json_payload  # noqa: E402
from tf_popef_op import runtime  # noqa: E402
from tf_popef_op.runtime import ModelRunner, RuntimeConfig  # noqa: E402

ALIGN = 64


def chain_popef(num_ops: int) -> bytes:
    """O = chain of num_ops one-element float32 ops on X: step i is Add(h, W) for even i and
    Relu(h) for odd i; intermediates live in the arena, W is a TensorData weight."""
    assert num_ops >= 1
    anchors = [{"name": "X", "dtype": "float32", "shape": [1], "direction": "input", "subgraph": 0, "batch_axis": 0},
               {"name": "O", "dtype": "float32", "shape": [1], "direction": "output", "subgraph": 0,
                "batch_axis": 0}]
    tensors = [{"id": 0, "name": "X", "dtype": "float32", "shape": [1], "storage": "input", "anchor": "X"},
               {"id": 1, "name": "O", "dtype": "float32", "shape": [1], "storage": "output", "anchor": "O"},
               {"id": 2, "name": "W", "dtype": "float32", "shape": [1], "storage": "weight", "offset": 0}]
    steps, prev = [], 0
    for i in range(num_ops):
        last = i == num_ops - 1
        out = 1 if last else 3 + i
        if not last:
            tensors.append({"id": out, "name": f"h{i}", "dtype": "float32", "shape": [1], "storage": "arena",
                            "offset": ALIGN * i})
        if i % 2 == 0:
            steps.append({"op": "Add", "name": f"add{i}", "inputs": [prev, 2], "outputs": [out], "attrs": {}})
        else:
            steps.append({"op": "Relu", "name": f"relu{i}", "inputs": [prev], "outputs": [out], "attrs": {}})
        prev = out
    arena = ALIGN * max(num_ops - 1, 1)
    metadata = {"producer": "bench_runtime_overhead", "ipu_version": "ipu2", "num_ipus": 1, "replication_factor": 1,
                "is_inference": True, "batch_size": 1, "batch_axis": 0, "anchors": anchors,
                "program_flow": {"load": ["load"], "main": ["main"]}}
    executable = {"version": 1, "weights_bytes": ALIGN, "arena_bytes": arena, "tensors": tensors,
                  "programs": {"load": [{"op": "LoadTensorData", "tensor_data": "W", "offset": 0, "nbytes": 4}],
                               "main": steps},
                  "subgraphs": [{"index": 0, "name": "graph0", "program": "main", "batch_size": 1, "batch_axis": 0,
                                 "inputs": ["X"], "outputs": ["O"]}]}
    return encode_popef([(BlobType.METADATA, "metadata", json_payload(metadata)),
                         (BlobType.EXECUTABLE, "executable", json_payload(executable)),
                         (BlobType.TENSOR_DATA, "W", np.array([0.5], np.float32).tobytes())])


def add_popef() -> bytes:
    """O = X + Y, one float32 each: the smallest request."""
    anchors = [{"name": n, "dtype": "float32", "shape": [1], "direction": d, "subgraph": 0, "batch_axis": 0}
               for n, d in (("X", "input"), ("Y", "input"), ("O", "output"))]
    tensors = [{"id": i, "name": n, "dtype": "float32", "shape": [1], "storage": d, "anchor": n}
               for i, (n, d) in enumerate((("X", "input"), ("Y", "input"), ("O", "output")))]
    metadata = {"producer": "bench_runtime_overhead", "ipu_version": "ipu2", "num_ipus": 1, "replication_factor": 1,
                "is_inference": True, "batch_size": 1, "batch_axis": 0, "anchors": anchors,
                "program_flow": {"main": ["main"]}}
    executable = {"version": 1, "weights_bytes": 0, "arena_bytes": 0, "tensors": tensors,
                  "programs": {"main": [{"op": "Add", "name": "add", "inputs": [0, 1], "outputs": [2], "attrs": {}}]},
                  "subgraphs": [{"index": 0, "name": "graph0", "program": "main", "batch_size": 1, "batch_axis": 0,
                                 "inputs": ["X", "Y"], "outputs": ["O"]}]}
    return encode_popef([(BlobType.METADATA, "metadata", json_payload(metadata)),
                         (BlobType.EXECUTABLE, "executable", json_payload(executable))])


def median_us(call, iters: int, rounds: int = 5) -> float:
    """Median over `rounds` of the mean time per call of `iters` calls (µs)."""
    per_call = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(iters):
            call()
        per_call.append((time.perf_counter() - t0) / iters * 1e6)
    return statistics.median(per_call)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ops", type=int, default=200, help="ops in the long chain")
    ap.add_argument("--iters", type=int, default=20000, help="requests per timing round")
    args = ap.parse_args()

    x = np.array([1.0], np.float32)
    y = np.array([2.0], np.float32)
    out = np.zeros(1, np.float32)
    results = {}
    adds = {spin: ModelRunner(add_popef(), RuntimeConfig(spin_ns=spin)) for spin in (RuntimeConfig().spin_ns, 0)}
    for _ in range(2):  # interleaved rounds; keep the second (warm) one
        for spin, add in adds.items():
            results[spin] = median_us(lambda a=add: a.execute({"X": x, "Y": y}, {"O": out}), args.iters)
    for add in adds.values():
        add.close()

    runners = {n: ModelRunner(chain_popef(n)) for n in (1, args.ops)}
    profiled = ModelRunner(chain_popef(args.ops), RuntimeConfig(profile=True))
    chain_iters = max(args.iters // 4, 100)
    for _ in range(2):  # interleaved rounds; keep the second (warm) one
        t = {n: median_us(lambda r=r: r.execute({"X": x}, {"O": out}), chain_iters) for n, r in runners.items()}
        profiled.reset_profile()
        t_prof = median_us(lambda: profiled.execute({"X": x}, {"O": out}), chain_iters)
    prof, summary = profiled.profile(), profiled.profile_summary()
    kernel_us = summary["kernel_us"] / summary["kernel_calls"]
    dispatch_us = summary["dispatch_us"] / summary["kernel_calls"]
    for r in (*runners.values(), profiled):
        r.close()
    per_op = (t[args.ops] - t[1]) / (args.ops - 1)
    prof_cost = (t_prof - t[args.ops]) / args.ops

    print(f"# bench_runtime_overhead: {platform.processor() or platform.machine()}, "
          f"{runtime.num_threads()} intra-op threads, {args.iters} requests per round\n")
    print("| measurement | value |")
    print("|---|---:|")
    spin = RuntimeConfig().spin_ns
    print(f"| synchronous execute round trip, one-op model, spin_ns={spin} (default) (µs) | {results[spin]:.2f} |")
    print(f"| synchronous execute round trip, one-op model, spin_ns=0 (µs) | {results[0]:.2f} |")
    print(f"| chain of 1 op, execute (µs) | {t[1]:.2f} |")
    print(f"| chain of {args.ops} ops, execute (µs) | {t[args.ops]:.2f} |")
    print(f"| per-op dispatch, (t_{args.ops} - t_1) / {args.ops - 1} (µs/op) | {per_op:.3f} |")
    print(f"| profiler: kernel time per op (µs) | {kernel_us:.3f} |")
    print(f"| profiler: runtime dispatch per op, (run - kernels) / ops (µs) | {dispatch_us:.3f} |")
    print(f"| profiling on: extra cost (µs/op) | {prof_cost:.3f} |")


if __name__ == "__main__":
    main()
