"""ConvNeXt-Tiny's, ViT-Tiny's or the BERT encoder's dense layers in the network, ours against OpenVINO's, layer group
by layer group, batch 1 or 8, fp32: our profiled FusedMatMul / MatMul steps (each with the
epilogue it fuses: bias, Gelu, the residual sum) next to OpenVINO's executed FullyConnected layers
plus the layers it runs the Gelu in (a "Subgraph" or Multiply layers named .../gelu/...), from its
perf counters. OpenVINO's residual Adds carry no stage or layer in their names: they are a row of
their own. Where the MatMul/Gemm op-class profile compares our GEMMs with a fused Gelu to
OpenVINO's without one, this lines up like with like.

Ours runs the cached default-option PopEF (benchmarks/.cache/<export>-b<B>-fp32.popef), OpenVINO
the peer table's graph (model_suite.standard_onnx of the cached export). Each side runs in its own
process, the two alternating for --rounds rounds (which goes first swaps every round); each
process times --runs unprofiled runs (median: the latency), then --runs profiled ones. Per group:
the median over rounds of the group's per-run time (ours: the sum of the steps' median µs;
OpenVINO: its counters are running means in whole µs, so a layer's mean over the profiled runs is
read from the first and last reading). Also each side's latency and profiled sum, so a reader can
scale each side to its own latency.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/gemm_layers_vs_openvino.py [--model convnext_tiny|vit_encoder|bert_encoder] \
        [--batch 1] [--rounds 2] [--runs 30] [--threads 2]
"""
import argparse
import collections
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(HERE, ".cache")


def group_of(model: str, name: str):
    """The row a MatMul / FullyConnected / Gelu layer of `name` belongs to, or None."""
    if model == "convnext_tiny":
        stage = re.search(r"stage_(\d)_block", name)
        if stage is None:
            return "residual Add (OpenVINO)" if re.search(r"convnext_tiny_1/Add(_\d+)?$", name) else None
        if "pointwise_conv_1" in name or "gelu" in name.lower():
            return f"stage {stage.group(1)} up (+Gelu)"
        if "pointwise_conv_2" in name or "layer_scale" in name:
            return f"stage {stage.group(1)} down (+residual)"
        return None
    if model == "bert_encoder":
        # tf2onnx numbers BERT's dense layers dense_1_1 (fc1), dense_2 (fc2), dense_3_1, dense_2_2, ...:
        # odd is the FFN's up-projection; the classifier head (dense_8_1/MatMul, no Tensordot) is none.
        if re.search(r"functional_1/add_\d+(_\d+)?/Add$", name):
            return "residual Add (OpenVINO)"
        dense = re.search(r"dense_(\d+)(_\d+)?/(Tensordot|Gelu)", name)
        if dense:
            return "fc1 (+Gelu)" if int(dense.group(1)) % 2 == 1 else "fc2 (+residual)"
    else:
        if re.search(r"/add_\d+_1/Add$", name):
            return "residual Add (OpenVINO)"
        dense = re.search(r"dense_(\d+)_1/", name)
        if dense:
            return "fc1 (+Gelu)" if int(dense.group(1)) % 2 == 0 else "fc2 (+residual)"
    # ours runs the three projections as one GEMM (merge_qkv_projections), named after the output
    # projection's Reshape: one row against OpenVINO's three FullyConnected layers
    if name.endswith("_attention_qkv"):
        return "attention Q/K/V"
    part = re.search(r"attention_\d+_1/(query|key|value|attention_output)_1/", name)
    if part:
        return "attention Q/K/V" if part.group(1) != "attention_output" else "attention output (+residual)"
    return None


def worker(side: str, model: str, batch: int, runs: int, threads: int) -> dict:
    sys.path.insert(0, HERE)
    export = sorted(glob.glob(os.path.join(CACHE, f"{model}-*.onnx")))[0]
    groups = collections.Counter()
    if side == "ours":
        from compiler import Executable
        from profile_model import random_feeds
        from tf_popef_op.runtime import ModelRunner, RuntimeConfig
        exe = Executable.load(f"{export[:-len('.onnx')]}-b{batch}-fp32.popef")
        runner = ModelRunner(exe)
        feed = random_feeds(runner, None, np.random.default_rng(0))
        outs = {o.name: np.zeros(o.shape, o.numpy_data_type()) for o in runner.get_execute_outputs()}
        latency = []
        for i in range(runs + 3):
            t0 = time.perf_counter()
            runner.execute(feed, outs)
            latency.append(time.perf_counter() - t0)
        del runner
        runner = ModelRunner(exe, RuntimeConfig(profile=True))
        runner.execute(feed, outs)
        steps = collections.defaultdict(list)
        for _ in range(runs):
            runner.reset_profile()
            runner.execute(feed, outs)
            for e in runner.profile():
                steps[(e["op"], e["node"])].append(e["total_us"])
        medians = {key: statistics.median(us) for key, us in steps.items()}
        for (op, node), us in medians.items():
            group = group_of(model, node) if "MatMul" in op or "Gemm" in op else None
            if group is not None:
                groups[group] += us
    else:
        import onnx
        import openvino as ov
        from model_suite import standard_onnx
        from openvino_peer import compiled_model
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "standard.onnx")
            onnx.save(standard_onnx(onnx.load(export), batch, "fp32"), path)
            plain, profiled = compiled_model(path, threads, "fp32"), compiled_model(path, threads, "fp32", profile=True)
        (inp,) = plain.inputs
        dtype = inp.get_element_type().to_dtype()
        rng = np.random.default_rng(0)
        # token ids (BERT) small and valid, as profile_model.random_feeds gives ours
        x = (rng.integers(0, 2, list(inp.shape)) if dtype.kind in "iu" else rng.standard_normal(list(inp.shape))
             ).astype(dtype)
        request = plain.create_infer_request()
        latency = []
        for _ in range(runs + 3):
            t0 = time.perf_counter()
            request.infer({0: x})
            latency.append(time.perf_counter() - t0)
        request = profiled.create_infer_request()
        request.infer({0: x})

        def reading():
            return {(p.node_type, p.node_name): p.real_time.total_seconds() * 1e6
                    for p in request.get_profiling_info() if p.status == ov.ProfilingInfo.Status.EXECUTED}
        first = reading()
        for _ in range(runs):
            request.infer({0: x})
        last = reading()
        medians = {key: (mean * (runs + 1) - first.get(key, 0.0)) / runs for key, mean in last.items()}
        for (op, node), us in medians.items():
            if op == "FullyConnected" or "gelu" in node.lower() or (op in ("Add", "Subgraph", "Eltwise") and
                                                                 "Add" in node.rsplit("/", 1)[-1]):
                group = group_of(model, node)
                if group is not None:
                    groups[group] += us
    return {"latency_ms": statistics.median(latency[3:]) * 1e3, "profiled_sum_ms": sum(medians.values()) / 1e3,
            "groups_ms": {g: us / 1e3 for g, us in groups.items()}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="convnext_tiny", choices=["convnext_tiny", "vit_encoder", "bert_encoder"])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--worker", choices=["ours", "openvino"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.model, args.batch, args.runs, args.threads)))
        return
    env = dict(os.environ, TF_POPEF_NUM_THREADS=str(args.threads))
    results = collections.defaultdict(list)
    for r in range(args.rounds):
        for side in (("ours", "openvino") if r % 2 == 0 else ("openvino", "ours")):
            out = subprocess.run([sys.executable, __file__, "--worker", side, "--model", args.model,
                                  "--batch", str(args.batch), "--runs", str(args.runs), "--threads", str(args.threads)],
                                 env=env, check=True, capture_output=True, text=True).stdout
            results[side].append(json.loads(out.strip().splitlines()[-1]))
    load = os.getloadavg()[0]
    print(f"# {args.model} b{args.batch} fp32, {args.threads} threads, {args.rounds} rounds of {args.runs} runs, "
          f"load average {load:.1f}")

    def med(side, f):
        return statistics.median(f(x) for x in results[side])
    for side in ("ours", "openvino"):
        print(f"# {side}: latency {med(side, lambda x: x['latency_ms']):.2f} ms, profiled sum "
              f"{med(side, lambda x: x['profiled_sum_ms']):.2f} ms")
    names = sorted({g for side in results.values() for x in side for g in x["groups_ms"]})
    print("| layers | ours ms | OpenVINO ms | ours / OpenVINO |\n|---|---:|---:|---:|")
    total = [0.0, 0.0]
    for g in names:
        a, b = (med(s, lambda x: x["groups_ms"].get(g, 0.0)) for s in ("ours", "openvino"))
        total[0] += a
        total[1] += b
        print(f"| {g} | {a:.2f} | {b:.2f} | {a / b:.2f} |" if a and b else f"| {g} | {a:.2f} | {b:.2f} | |")
    print(f"| all | {total[0]:.2f} | {total[1]:.2f} | {total[0] / total[1]:.2f} |")


if __name__ == "__main__":
    main()
