"""OpenVINO's executed nodes on a cached export, from its perf counters: the latency (unprofiled
median), the time per node type and the slowest nodes, µs per run. OpenVINO runs the peer table's
graph (model_suite.standard_onnx of benchmarks/.cache/<model>-*.onnx, batch fixed, fp32). Its
counters are running means in whole µs, so a node's mean over the profiled runs is read from the
first and last reading. For comparing with our per-step profile (profile_model.py) of the same
export's PopEF.

    .venv/bin/python benchmarks/openvino_nodes.py bert_encoder --batch 8 [--runs 30] [--threads 2] [--top 45]
"""
import argparse
import collections
import glob
import os
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", help="export name in benchmarks/.cache (bert_encoder, vit_encoder, ...)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--top", type=int, default=45)
    args = ap.parse_args()
    import onnx
    import openvino as ov
    from model_suite import standard_onnx
    from openvino_peer import compiled_model
    exports = sorted(glob.glob(os.path.join(HERE, ".cache", f"{args.model}-*.onnx")))
    if not exports:
        raise SystemExit(f"no export of {args.model} in benchmarks/.cache")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "standard.onnx")
        onnx.save(standard_onnx(onnx.load(exports[0]), args.batch, "fp32"), path)
        plain = compiled_model(path, args.threads, "fp32")
        profiled = compiled_model(path, args.threads, "fp32", profile=True)
    rng = np.random.default_rng(0)
    feeds = {}
    for i, inp in enumerate(plain.inputs):
        shape, kind = list(inp.shape), inp.element_type.get_type_name()
        if kind.startswith("i"):  # token ids
            feeds[i] = rng.integers(0, 100, shape).astype(np.int64 if "64" in kind else np.int32)
        else:
            feeds[i] = rng.standard_normal(shape).astype(np.float32)
    request = plain.create_infer_request()
    latency = []
    for _ in range(args.runs + 3):
        t0 = time.perf_counter()
        request.infer(feeds)
        latency.append(time.perf_counter() - t0)
    request = profiled.create_infer_request()
    request.infer(feeds)

    def reading():
        return {(p.node_type, p.exec_type, p.node_name): p.real_time.total_seconds() * 1e6
                for p in request.get_profiling_info() if p.status == ov.ProfilingInfo.Status.EXECUTED}
    first = reading()
    for _ in range(args.runs):
        request.infer(feeds)
    last = reading()
    nodes = {key: (mean * (args.runs + 1) - first.get(key, 0.0)) / args.runs for key, mean in last.items()}
    print(f"# {args.model} b{args.batch} fp32, OpenVINO, {args.threads} threads, load average {os.getloadavg()[0]:.1f}: "
          f"latency {statistics.median(latency[3:]) * 1e3:.2f} ms, profiled sum {sum(nodes.values()) / 1e3:.2f} ms")
    by_type = collections.Counter()
    for (kind, _, _), us in nodes.items():
        by_type[kind] += us
    for kind, us in by_type.most_common():
        print(f"{kind:24s} {us:10.1f}")
    for (kind, impl, name), us in sorted(nodes.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"{us:9.1f}  {kind:16s} {impl:22s} {name}")


if __name__ == "__main__":
    main()
