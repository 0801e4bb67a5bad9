"""MobileNetV2's or EfficientNetB0's blocks (--model), ours against OpenVINO's, one row per block:
our profiled step time(s) of the block (the fused NchwcInvertedResidual, or the separate steps
where it is not fused) next to the sum of OpenVINO's executed layers of that block (its expand,
depthwise and project convolutions with their BatchNorm and activation fused in, and the
residual Add), from its perf counters (op_profiles.py reads them the same way). Where a fused
block of ours loses to OpenVINO's unfused layers is what this lines up.

Layers are put into blocks by name: a Keras MobileNetV2's nodes and weights are named
".../block_<i>_..." ("expanded_conv_..." for block 0; Conv1 the stem, Conv_1 the head), an
EfficientNetB0's ".../block<i><letter>_..." (stem_, top_ the head; the squeeze-and-excite's mean,
reduce and expand convolutions, ".../block<i><letter>_se_squeeze|reduce|expand...", are a row of
their own, "block <i><letter> SE", the excitation Mul stays with its block: ours folds it into the
project convolution), and both runtimes keep the ONNX node's name on its step or layer (tf2onnx's
"Conv__<n>" convolutions by their weight's name). Per row: the median over the profiled runs of the block's summed time.
Each runtime runs in its own process, the two processes alternating for --rounds rounds of
--runs profiled runs (in one process, either runtime's idle threads skewed the other's times by
up to 1.7x); a group's time is the median of its per-round medians.

Profiling costs the two runtimes differently (OpenVINO's perf counters add more to its run than
our step timers add to ours), so each round also times each contender unprofiled, in a process
of its own (--runs untimed warm-up runs, then --runs timed ones; median), and the table gives
every group also scaled to its own side's unprofiled latency: a group's profiled median times
(median unprofiled latency / median profiled run total), that side's median over the rounds.
The scaled columns add up to each side's unprofiled latency, so they say where the difference
between the two latencies goes. GFLOP/s: a group's convolution and MatMul multiply-adds x 2
over our scaled time.

    PYTHONPATH=$PWD .venv/bin/python benchmarks/blocks_vs_openvino.py [--model mobilenet_v2|efficientnet_b0] \
        [--popef X.popef] [--batch 1] [--rounds 10] [--runs 10] [--threads 2]
"""
import argparse
import collections
import copy
import glob
import json
import os
import re
import statistics
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
from interleaved_timing import warm_median  # noqa: E402

CACHE = os.path.join(HERE, ".cache")
_BLOCK = re.compile(r"(block_(\d+)_|expanded_conv_|Conv1_|Conv_1_|predictions_|global_average_pooling)")
_EFFICIENTNET_BLOCK = re.compile(r"(block(\d+[a-z])_(se_(squeeze|reduce|expand))?|stem_|top_|predictions_|avg_pool)")


def _mobilenet_group(text: str):
    m = _BLOCK.search(text)
    if m is None:
        return None
    if m.group(2) is not None:
        return f"block {int(m.group(2)):02d}"
    return {"expanded_conv_": "block 00", "Conv1_": "stem", "Conv_1_": "head 1x1",
            "predictions_": "classifier", "global_average_pooling": "classifier"}[m.group(1)]


def _efficientnet_group(text: str):
    m = _EFFICIENTNET_BLOCK.search(text)
    if m is None:
        return None
    if m.group(2) is not None:
        return f"block {m.group(2)}" + (" SE" if m.group(3) else "")
    return {"stem_": "stem", "top_": "head 1x1", "predictions_": "classifier", "avg_pool": "classifier"}[m.group(1)]


FAMILIES = {"mobilenet_v2": _mobilenet_group, "efficientnet_b0": _efficientnet_group}
_group_of = _mobilenet_group  # set by main() / use_family()


def use_family(model: str) -> None:
    """Group layers by `model`'s (a FAMILIES key) block names."""
    global _group_of
    _group_of = FAMILIES[model]


def groups_of(model):
    """{node name or output name: group} for the export's nodes: by the node's name, else its
    weight's (input 1), else its first input's producer's group (a Clip after a Conv__n)."""
    init = {t.name for t in model.graph.initializer}
    out = {}
    for node in model.graph.node:
        group = _group_of(node.name)
        if group is None and len(node.input) > 1 and node.input[1] and not node.input[1].endswith("_min__318"):
            group = _group_of(node.input[1]) if node.input[1] in init or "merged_input" in node.input[1] else None
        if group is None and node.input and node.input[0] in out:
            group = out[node.input[0]]
        if group is None:
            continue
        out[node.name] = group
        for o in node.output:
            out[o] = group
    return out


def group_of_name(name: str, groups):
    """A step's or layer's group: its name, or a prefix of it before a '/' suffix, looked up."""
    while name:
        if name in groups:
            return groups[name]
        if _group_of(name) is not None:
            return _group_of(name)
        if "/" not in name:
            return None
        name = name.rsplit("/", 1)[0]
    return None


def shapes_of(model):
    """{group: "HxW Cin->Cexp->Cout sS"} of the blocks, from the export's weights and shapes."""
    import onnx
    inferred = onnx.shape_inference.infer_shapes(model)
    dims = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in list(inferred.graph.value_info) + list(inferred.graph.input)}
    weights = {t.name: tuple(t.dims) for t in model.graph.initializer}
    groups = groups_of(model)
    convs = collections.defaultdict(list)
    for node in model.graph.node:
        if node.op_type == "Conv" and node.input[1] in weights and node.name in groups:
            stride = next((list(a.ints) for a in node.attribute if a.name == "strides"), [1, 1])[0]
            convs[groups[node.name]].append((weights[node.input[1]], dims.get(node.input[0], []), stride))
    out = {}
    for group, layers in convs.items():
        x = layers[0][1]
        size = f"{x[2]}x{x[3]}" if len(x) == 4 else "?"
        channels = [layers[0][0][1] if layers[0][0][1] > 1 else layers[0][0][0]] + [w[0] for w, _, _ in layers
                                                                                    if w[1] > 1 or w[0] == 1]
        stride = max(s for _, _, s in layers)
        out[group] = f"{size} {'->'.join(str(c) for c in channels)} s{stride}"
    return out


def flops_of(model, batch: int):
    """{group: multiply-adds x 2} of the export's Conv/MatMul/Gemm nodes at `batch` (flop_count's
    convention and arithmetic), on a copy whose inputs take that batch and whose other shapes are
    inferred again (a tf2onnx export's are symbolic in the batch)."""
    from flop_count import node_flops
    fixed = copy.deepcopy(model)
    del fixed.graph.value_info[:]
    for value in fixed.graph.input:
        if value.type.tensor_type.shape.dim:
            value.type.tensor_type.shape.dim[0].dim_value = batch
    for value in fixed.graph.output:
        value.type.tensor_type.ClearField("shape")
    groups = groups_of(model)
    out = collections.Counter()
    for node, flops in node_flops(fixed):
        if node.name in groups:
            out[groups[node.name]] += flops
    return out


class Ours:
    """Our runner on the PopEF; run() adds one profiled run's {group: µs} to self.runs."""

    def __init__(self, popef: str, batch: int, groups):
        from profile_model import random_feeds
        from tf_popef_op.runtime import ModelRunner, RuntimeConfig
        self.runner = ModelRunner(popef, RuntimeConfig(profile=True))
        self.feeds = random_feeds(self.runner, batch, np.random.default_rng(0))
        self.groups, self.runs, self.steps = groups, [], collections.defaultdict(set)
        for _ in range(3):
            self.runner.execute(self.feeds)

    def run(self):
        self.runner.reset_profile()
        self.runner.execute(self.feeds)
        per = collections.Counter()
        for e in self.runner.profile():
            group = group_of_name(e["node"], self.groups) or "other"
            per[group] += e["total_us"]
            self.steps[group].add(e["op"])
        self.runs.append(per)


def _openvino_request(onnx_path: str, batch: int, threads: int, profile: bool):
    """(infer request, its input array) as bench_models.py times OpenVINO: threads not pinned (the
    contenders share the cores in turn), the input a tensor over the array (no copy per run)."""
    import openvino as ov
    from openvino_peer import compiled_model
    compiled = compiled_model(onnx_path, threads, "fp32", profile=profile, pinning=False)
    request = compiled.create_infer_request()
    (inp,) = compiled.inputs
    shape = [batch] + list(inp.get_partial_shape().get_min_shape())[1:]
    feed = np.ascontiguousarray(np.random.default_rng(0).standard_normal(shape).astype(np.float32))
    request.set_input_tensor(ov.Tensor(feed, shared_memory=True))
    return request, feed


class OpenVino:
    """OpenVINO fp32 with perf counters on the export; run() infers once and keeps the reading
    (the plugin reports running means: op_profiles.runs_from_running_means)."""

    def __init__(self, onnx_path: str, batch: int, threads: int, groups):
        self.request, self.feed = _openvino_request(onnx_path, batch, threads, profile=True)
        self.groups, self.layers = groups, collections.defaultdict(set)
        self.request.infer()
        self.readings = [self._reading()]

    def _reading(self):
        import openvino as ov
        out = {}
        for layer in self.request.get_profiling_info():
            if layer.status != ov.ProfilingInfo.Status.EXECUTED:
                continue
            group = group_of_name(layer.node_name, self.groups) or "other"
            self.layers[group].add(layer.node_type)
            out[layer.node_name] = (layer.node_name, group, layer.real_time.total_seconds() * 1e6)
        return out

    def run(self):
        self.request.infer()
        self.readings.append(self._reading())

    @property
    def runs(self):
        from op_profiles import runs_from_running_means
        out = []
        for run in runs_from_running_means(self.readings):
            per = collections.Counter()
            for _, group, us, _layer in run:
                per[group] += us
            out.append(per)
        return out


def scale_to_latency(by_group, profiled_total: float, latency: float):
    """{group: time} scaled by latency / profiled_total: each side's profiled groups as shares of
    its unprofiled latency (profiling costs the two runtimes differently)."""
    return {g: t * latency / profiled_total for g, t in by_group.items()}


def median_by_group(runs):
    """({group: median µs}, median total µs) over one round's runs."""
    keys = {k for r in runs for k in r}
    return {k: statistics.median(r[k] for r in runs) for k in keys}, statistics.median(sum(r.values()) for r in runs)


def _latency_worker(which: str, onnx_path: str, popef: str, batch: int, threads: int, runs: int) -> None:
    """In a process of its own: print one contender's unprofiled latency (median µs) as JSON."""
    if which == "openvino":
        request, feed = _openvino_request(onnx_path, batch, threads, profile=False)
        run = request.infer
    else:
        from profile_model import random_feeds
        from tf_popef_op.runtime import ModelRunner
        runner = ModelRunner(popef)
        feeds = random_feeds(runner, batch, np.random.default_rng(0))
        run = lambda: runner.execute(feeds)  # noqa: E731
    print(json.dumps({"latency": warm_median(run, runs) * 1e6}))


def _worker(which: str, onnx_path: str, popef: str, batch: int, threads: int, runs: int) -> None:
    """In a process of its own: print one contender's round as JSON."""
    import onnx
    groups = groups_of(onnx.load(onnx_path))
    contender = OpenVino(onnx_path, batch, threads, groups) if which == "openvino" else Ours(popef, batch, groups)
    for _ in range(runs):
        contender.run()
    by_group, total = median_by_group(contender.runs)
    kinds = contender.layers if which == "openvino" else contender.steps
    print(json.dumps({"groups": by_group, "total": total, "kinds": {g: sorted(k) for g, k in kinds.items()}}))


def main():
    import onnx
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", choices=sorted(FAMILIES), default="mobilenet_v2")
    p.add_argument("--popef", help="our PopEF (default: the cached default-option one of --batch, fp32)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--runs", type=int, default=10, help="profiled runs of one runtime per block")
    p.add_argument("--threads", type=int, default=int(os.environ.get("TF_POPEF_NUM_THREADS", os.cpu_count())))
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--latency", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    use_family(args.model)
    onnx_path = sorted(glob.glob(os.path.join(CACHE, f"{args.model}-*.onnx")))[0]
    popef = args.popef or sorted(glob.glob(os.path.join(CACHE, f"{args.model}-*-b{args.batch}-fp32.popef")))[0]
    if args.worker:
        return (_latency_worker if args.latency else _worker)(args.worker, onnx_path, popef, args.batch, args.threads, args.runs)
    shapes = shapes_of(onnx.load(onnx_path))
    print(f"{args.model}; threads {args.threads}; batch {args.batch}; {args.rounds} rounds of {args.runs} profiled runs each; "
          f"load average {os.getloadavg()[0]:.2f}")
    rounds = {"ours": [], "openvino": []}
    latencies = {"ours": [], "openvino": []}

    def worker(which, *extra):
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--model", args.model, "--popef", popef, "--batch",
                              str(args.batch), "--runs", str(args.runs), "--threads", str(args.threads),
                              "--worker", which, *extra], capture_output=True, text=True,
                             env=dict(os.environ, TF_POPEF_NUM_THREADS=str(args.threads)))
        if out.returncode != 0:
            raise SystemExit(f"{which} worker failed:\n{out.stderr[-3000:]}")
        return json.loads(out.stdout.strip().splitlines()[-1])

    for r in range(args.rounds):
        for which in (["openvino", "ours"] if r % 2 == 0 else ["ours", "openvino"]):
            latencies[which].append(worker(which, "--latency")["latency"])
            rounds[which].append(worker(which))
    print(f"load average {os.getloadavg()[0]:.2f}")

    def medians(which):
        keys = {g for r in rounds[which] for g in r["groups"]}
        return ({g: statistics.median(r["groups"].get(g, 0.0) for r in rounds[which]) for g in keys},
                statistics.median(r["total"] for r in rounds[which]),
                {g: set(k) for r in rounds[which] for g, k in r["kinds"].items()})
    o, o_total, our_steps = medians("ours")
    v, v_total, ov_layers = medians("openvino")
    o_lat, v_lat = statistics.median(latencies["ours"]), statistics.median(latencies["openvino"])
    o_scale, v_scale = o_lat / o_total, v_lat / v_total
    o_scaled, v_scaled = scale_to_latency(o, o_total, o_lat), scale_to_latency(v, v_total, v_lat)
    flops = flops_of(onnx.load(onnx_path), args.batch)
    print(f"unprofiled latency: ours {o_lat / 1e3:.3f} ms (profiled total {o_total / 1e3:.3f}, scale {o_scale:.3f}); "
          f"OpenVINO {v_lat / 1e3:.3f} ms (profiled total {v_total / 1e3:.3f}, scale {v_scale:.3f})")
    print("| group | shape | ours ms | OpenVINO ms | ours/OpenVINO | ours scaled ms | OpenVINO scaled ms "
          "| scaled ratio | scaled diff ms | ours GFLOP/s | our steps | OpenVINO layers |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
    for group in sorted(set(o) | set(v)):
        a, b = o.get(group, 0.0) / 1e3, v.get(group, 0.0) / 1e3
        sa, sb = o_scaled.get(group, 0.0) / 1e3, v_scaled.get(group, 0.0) / 1e3
        ratio = f"{a / b:.2f}" if b > 0 else "-"
        scaled = f"{sa / sb:.2f}" if sb > 0 else "-"
        gflops = f"{flops[group] / (sa * 1e6):.0f}" if flops.get(group) and sa > 0 else ""
        print(f"| {group} | {shapes.get(group, '')} | {a:.3f} | {b:.3f} | {ratio} | {sa:.3f} | {sb:.3f} | {scaled} | "
              f"{sa - sb:+.3f} | {gflops} | {', '.join(sorted(our_steps.get(group, ())))} | "
              f"{', '.join(sorted(ov_layers.get(group, ())))} |")
    print(f"| all (median of run totals) | | {o_total / 1e3:.3f} | {v_total / 1e3:.3f} | {o_total / v_total:.2f} | "
          f"{o_lat / 1e3:.3f} | {v_lat / 1e3:.3f} | {o_lat / v_lat:.2f} | {(o_lat - v_lat) / 1e3:+.3f} | | | |")


if __name__ == "__main__":
    main()
