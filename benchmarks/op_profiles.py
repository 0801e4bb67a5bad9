"""Where the time of one inference goes, per op type, for bench_models.py's "profile" part:
ModelRunner's per-op profiler (RuntimeConfig(profile=True), ModelRunner.profile()) next to
onnxruntime's (SessionOptions.enable_profiling: "Node" events of its JSON trace). Op types
differ where onnxruntime fuses (FusedConv = Conv + activation, FusedMatMul...), so compare
families, not names. Times are microseconds per run, averaged over `iters` profiled runs.
Convolutions are also split by kind (depthwise, 1x1, kxk), found from the node's weight
shape and group in the model each runtime ran; nodes that cannot be matched count as "other"."""
import collections
import copy
import json
import os
import tempfile
from typing import Dict

import numpy as np


def conv_kinds(model) -> Dict[str, str]:
    """{node name: "depthwise" | "1x1" | "kxk"} for the Conv-like nodes of `model`."""
    shapes = {t.name: tuple(t.dims) for t in model.graph.initializer}
    kinds = {}
    for node in model.graph.node:
        if "Conv" not in node.op_type or len(node.input) < 2 or node.input[1] not in shapes:
            continue
        kinds[node.name] = conv_kind(shapes[node.input[1]])
    return kinds


def conv_kind(weight) -> str:
    """From the weight shape [C_out, C_in / group, k...]: one input channel per output channel
    with a spatial kernel is depthwise (the only grouped convs in these networks)."""
    if all(k == 1 for k in weight[2:]):
        return "1x1"
    return "depthwise" if weight[1] == 1 else "kxk"


def _by_conv_kind(times_by_node: Dict[str, float], kinds: Dict[str, str]) -> Dict[str, float]:
    out = collections.Counter()
    for node, us in times_by_node.items():
        out[kinds.get(node, "other")] += us
    return dict(out.most_common())


def modelrunner_by_op(executable, x: np.ndarray, iters: int, model=None) -> Dict[str, object]:
    from tf_popef_op.runtime import ModelRunner, RuntimeConfig
    runner = ModelRunner(executable, RuntimeConfig(profile=True))
    (anchor,) = runner.get_execute_inputs()
    feed = {anchor.name: np.ascontiguousarray(x.astype(anchor.numpy_data_type()))}
    outs = {o.name: np.zeros(o.shape, o.numpy_data_type()) for o in runner.get_execute_outputs()}
    runner.execute(feed, outs)
    runner.reset_profile()
    for _ in range(iters):
        runner.execute(feed, outs)
    by_op, conv_nodes = collections.Counter(), collections.Counter()
    for e in runner.profile():
        by_op[e["op"]] += e["total_us"] / iters
        if "Conv" in e["op"]:
            conv_nodes[e["node"]] += e["total_us"] / iters
    summary = runner.profile_summary()
    runs = summary.get("runs") or iters
    return {"by_op_us": dict(by_op.most_common()), "run_us": summary["run_us"] / runs,
            "dispatch_us": summary["dispatch_us"] / runs, "kernel_calls": summary["kernel_calls"] / runs,
            "conv_by_kind_us": _by_conv_kind(conv_nodes, conv_kinds(model)) if model is not None else {}}


def onnxruntime_by_op(model, x: np.ndarray, threads: int, iters: int) -> Dict[str, object]:
    import onnxruntime as ort
    oracle = copy.deepcopy(model)
    oracle.ir_version = min(oracle.ir_version, 8)
    with tempfile.TemporaryDirectory() as folder:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(folder, "ort")
        session = ort.InferenceSession(oracle.SerializeToString(), options, providers=["CPUExecutionProvider"])
        (inp,) = session.get_inputs()
        feed = {inp.name: x.astype(np.float16 if inp.type == "tensor(float16)" else
                                   np.int64 if inp.type == "tensor(int64)" else
                                   np.int32 if inp.type == "tensor(int32)" else np.float32)}
        for _ in range(iters + 1):
            session.run(None, feed)
        with open(session.end_profiling()) as f:
            events = json.load(f)
    by_op, by_kind = collections.Counter(), collections.Counter()
    runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"][1:]  # first = warm-up
    if not runs:
        return {"by_op_us": {}, "run_us": float("nan")}
    first_timed = runs[0]["ts"]
    for e in events:
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time") and e["ts"] >= first_timed:
            by_op[e["args"]["op_name"]] += e["dur"] / len(runs)
            shapes = [next(iter(t.values())) for t in e["args"].get("input_type_shape", [])]
            if "Conv" in e["args"]["op_name"] and len(shapes) > 1 and len(shapes[1]) >= 3:
                # onnxruntime renames the nodes it rewrites (NCHWc...): classify by weight shape
                by_kind[conv_kind(shapes[1])] += e["dur"] / len(runs)
    return {"by_op_us": dict(by_op.most_common()), "run_us": sum(r["dur"] for r in runs) / len(runs),
            "conv_by_kind_us": dict(by_kind.most_common())}
