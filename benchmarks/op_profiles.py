"""Where the time of one inference goes, per op type and per op class (op_classes.py), for
bench_models.py's "profile" part: ModelRunner's per-op profiler (RuntimeConfig(profile=True),
ModelRunner.profile()) next to onnxruntime's (SessionOptions.enable_profiling: "Node" events of
its JSON trace) and OpenVINO's (PERF_COUNT: the infer request's get_profiling_info(), per
executed layer). Op types differ where a runtime fuses (FusedConv = Conv + activation,
FusedMatMul, OpenVINO's Subgraph...), so compare classes, not names. Times are microseconds per
run, averaged over `iters` profiled runs. Convolutions are classed by kind and kernel size,
found from the node's weight shape in the model each runtime ran (onnxruntime reports the shapes;
OpenVINO's layers are matched to the ONNX node they came from by name).

Each figure is the median over the profiled runs of that op's (or class's, or the whole run's)
time in one run, after one warm-up run: a run disturbed by another process moves a mean of few
runs by its whole excess, a median not at all."""
import collections
import copy
import json
import os
import re
import statistics
import tempfile
from typing import Dict, List, Optional, Tuple

import numpy as np

from compiler.kernel_fusion.passes.per_channel_affine_to_depthwise_conv import NODE_SUFFIX as AFFINE_CONV_SUFFIX
from op_classes import charged_class, conv_kind, nodes_by_step, op_class, peer_node

# The names our passes give a graph tensor's copy in another layout (the same values), and the
# graph tensor each stands for: to_nchwc_layout's blocked copy, sink_transposes_below_elementwise's
# untransposed one, fuse_layernorm's channels-last LayerNormalization output (named after the
# exit tensor of the chain it replaces, without the ":0").
LAYOUT_COPIES = ((re.compile(r"(.*)__nchwc$"), r"\1"), (re.compile(r"(.*)_untransposed(_\d+)?$"), r"\1"),
                 (re.compile(r"(.*)_channels_last_normalized$"), r"\1:0"))


def graph_tensor(name: str) -> str:
    """The graph tensor a tensor of our program holds (itself, or the one it is a layout copy of)."""
    for pattern, repl in LAYOUT_COPIES:
        if pattern.match(name):
            return graph_tensor(pattern.sub(repl, name))
    return name


def conv_kinds(model) -> Dict[str, str]:
    """{node name: conv_kind} for the Conv-like nodes of `model`, named by node and by output,
    and for the elementwise nodes right after one (OpenVINO names a convolution it fused with its
    BatchNorm Mul or activation after that last node)."""
    shapes = {t.name: tuple(t.dims) for t in model.graph.initializer}
    kinds, by_output = {}, {}
    for node in model.graph.node:  # topological order: a producer's kind is known before its consumers
        if node.op_type == "NchwcWinogradConv":  # its weight is the transformed [(m+2)², ...] tensor
            kind = "3x3"
        elif "Conv" in node.op_type and len(node.input) >= 2 and node.input[1] in shapes:
            kind = conv_kind(shapes[node.input[1]])
        elif op_class(node.op_type) == "Elementwise":
            kind = next((by_output[i] for i in node.input if i in by_output), None)
        else:
            continue
        if kind is None:
            continue
        kinds[node.name] = kind
        for out in node.output:
            by_output[out] = kinds[out] = kind
    return kinds


def kind_of_layer(layer_name: str, kinds: Dict[str, str]) -> Optional[str]:
    """The conv kind of an OpenVINO layer: its friendly name is the ONNX node's (or output's)
    name (conv_kinds: or the elementwise node it fused), with "/WithoutBiases"-style suffixes
    where the plugin split the node."""
    name = layer_name
    while name:
        if name in kinds:
            return kinds[name]
        if "/" not in name:
            return None
        name = name.rsplit("/", 1)[0]
    return None


def _convs_by_kind(by_class_us: Dict[str, float]) -> Dict[str, float]:
    return {cls[len("Conv "):]: us for cls, us in by_class_us.items() if cls.startswith("Conv ")}


def _median_of_runs(runs: List[List[Tuple[str, str, float]]]) -> Tuple[Dict[str, float], Dict[str, float]]:
    """({op: µs}, {class: µs}), each the median over `runs` (one list of (op, class, µs) per
    run; an op or class absent from a run counts 0 µs there), largest first."""
    per_run_ops = [collections.Counter() for _ in runs]
    per_run_classes = [collections.Counter() for _ in runs]
    for ops, classes, run in zip(per_run_ops, per_run_classes, runs):
        for op, cls, us in run:
            ops[op] += us
            classes[cls] += us

    def median(counters):
        keys = {k for c in counters for k in c}
        out = collections.Counter({k: statistics.median(c[k] for c in counters) for k in keys})
        return dict(out.most_common())
    return median(per_run_ops), median(per_run_classes)


def kind_of_step(node: str, kinds: Dict[str, str]) -> Optional[str]:
    """The conv kind of one of our steps: its node's in the converted model, or for the 1x1
    depthwise Conv a fusion pass makes of a per-channel affine (not in that model), that."""
    if node in kinds:
        return kinds[node]
    return conv_kind((2, 1, 1, 1)) if node.endswith(AFFINE_CONV_SUFFIX) else None


def modelrunner_by_op(executable, x: np.ndarray, iters: int, model=None) -> Dict[str, object]:
    """`model`: the converted ONNX model the PopEF was lowered from (its node names are our steps')."""
    from tf_popef_op.runtime import ModelRunner, RuntimeConfig
    runner = ModelRunner(executable, RuntimeConfig(profile=True))
    (anchor,) = runner.get_execute_inputs()
    feed = {anchor.name: np.ascontiguousarray(x.astype(anchor.numpy_data_type()))}
    outs = {o.name: np.zeros(o.shape, o.numpy_data_type()) for o in runner.get_execute_outputs()}
    runner.execute(feed, outs)
    kinds = conv_kinds(model) if model is not None else {}

    def class_of(entry) -> str:  # a profiled step's op class
        return op_class(entry["op"], kind_of_step(entry["node"], kinds))
    runs, run_us, dispatch_us, kernel_calls = [], [], [], []
    for _ in range(iters):
        runner.reset_profile()
        runner.execute(feed, outs)
        runs.append([(e["op"], class_of(e), e["total_us"]) for e in runner.profile()])
        summary = runner.profile_summary()
        run_us.append(summary["run_us"])
        dispatch_us.append(summary["dispatch_us"])
        kernel_calls.append(summary["kernel_calls"])
    by_op_us, by_class_us = _median_of_runs(runs)
    class_of_step = {e["node"]: class_of(e) for e in runner.profile()}
    return {"by_op_us": by_op_us, "by_class_us": by_class_us, "run_us": statistics.median(run_us),
            "dispatch_us": statistics.median(dispatch_us), "kernel_calls": statistics.median(kernel_calls),
            "conv_by_kind_us": _convs_by_kind(by_class_us), "class_of_step": class_of_step,
            "step_outputs": step_outputs(executable), "step_inputs": step_outputs(executable, "inputs")}


def step_outputs(executable, which: str = "outputs") -> Dict[str, List[str]]:
    """{step name: the graph tensors it writes} of the main program, in order (a blocked copy
    stands for its tensor); which="inputs": the tensors it reads."""
    from compiler import Executable
    if not isinstance(executable, Executable):
        executable = Executable.load(executable)
    names = {t["id"]: t["name"] for t in executable.executable["tensors"]}
    out: Dict[str, List[str]] = {}
    for step in executable.executable["programs"]["main"]:
        out.setdefault(step["name"], []).extend(graph_tensor(names[i]) for i in step[which])
    return out


class Charging:
    """Charges a peer's kernels to our classes (op_classes: "Charging the peers' nodes to our
    steps"): built from the ONNX model the peers run and our profile (modelrunner_by_op)."""

    def __init__(self, model, ours: Dict[str, object]):
        nodes = [(n.name, list(n.input), list(n.output)) for n in model.graph.node]
        sources = {t.name for t in model.graph.initializer} | {t.name for t in model.graph.input}
        owner = nodes_by_step(nodes, ours["step_outputs"], sources, ours.get("step_inputs"))
        self.class_of_node = {node: ours["class_of_step"][step] for node, step in owner.items()
                              if step in ours["class_of_step"]}
        self.names = {name for name, _, _ in nodes}
        self.producer = {out: name for name, _, outs in nodes for out in outs}

    def __call__(self, peer_kernel: str, kernel_class: str, outputs=()) -> str:
        """`outputs`: the tensors the kernel writes, where the peer says (a node onnxruntime made
        by fusing, e.g. its QuickGelu for x * sigmoid(x), has a name of its own but writes the
        last fused node's output; its layout reorders keep their class)."""
        node = peer_node(peer_kernel, self.names, self.producer)
        if kernel_class != "Layout/copy":  # a reorder the peer added writes a graph tensor it only moves
            for out in outputs:
                node = node or peer_node(out, self.names, self.producer)
        return charged_class(kernel_class, node, self.class_of_node)


def _charged(runs: List[List[tuple]], charging: Optional[Charging],
             outputs: Optional[Dict[str, List[str]]] = None) -> Tuple[List[List[tuple]], float]:
    """runs of (op, class, µs, kernel name) as (op, class, µs) with the classes charged, and the
    median µs per run moved to another class than the kernel's own; `outputs`: {kernel name: the
    tensors it writes}, where known."""
    if charging is None:
        return [[(op, cls, us) for op, cls, us, _ in run] for run in runs], 0.0
    outputs = outputs or {}
    out, moved = [], []
    for run in runs:
        charged = [(op, charging(name, cls, outputs.get(name, ())), us) for op, cls, us, name in run]
        moved.append(sum(us for (_, cls, _, _), (_, new, us) in zip(run, charged) if new != cls))
        out.append(charged)
    return out, statistics.median(moved) if moved else 0.0


def _peer_profile(runs: List[List[tuple]], charging: Optional[Charging],
                  outputs: Optional[Dict[str, List[str]]] = None) -> Dict[str, object]:
    _, kernel_class_us = _median_of_runs([[(op, cls, us) for op, cls, us, _ in run] for run in runs])
    charged_runs, moved_us = _charged(runs, charging, outputs)
    by_op_us, by_class_us = _median_of_runs(charged_runs)
    return {"by_op_us": by_op_us, "by_class_us": by_class_us, "by_kernel_class_us": kernel_class_us,
            "charged_to_our_classes_us": moved_us, "conv_by_kind_us": _convs_by_kind(by_class_us)}


def onnxruntime_by_op(model, x: np.ndarray, threads: int, iters: int,
                      charging: Optional[Charging] = None) -> Dict[str, object]:
    """`charging`: charge the kernels to our classes (by_class_us); by_kernel_class_us: by their own."""
    import onnxruntime as ort
    oracle = copy.deepcopy(model)
    oracle.ir_version = min(oracle.ir_version, 8)
    with tempfile.TemporaryDirectory() as folder:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(folder, "ort")
        if charging is not None:  # the graph it runs: what its fused nodes write, for the charging
            options.optimized_model_filepath = os.path.join(folder, "optimized.onnx")
        try:
            session = ort.InferenceSession(oracle.SerializeToString(), options, providers=["CPUExecutionProvider"])
        except Exception:
            if charging is None:
                raise
            # a graph it cannot serialize: profile without it (its own fused kernels keep their class)
            options.optimized_model_filepath = ""
            session = ort.InferenceSession(oracle.SerializeToString(), options, providers=["CPUExecutionProvider"])
        kernel_outputs = {}
        if options.optimized_model_filepath and os.path.exists(options.optimized_model_filepath):
            import onnx
            optimized = onnx.load(options.optimized_model_filepath, load_external_data=False)
            kernel_outputs = {n.name: list(n.output) for n in optimized.graph.node}
        (inp,) = session.get_inputs()
        feed = {inp.name: x.astype(np.float16 if inp.type == "tensor(float16)" else
                                   np.int64 if inp.type == "tensor(int64)" else
                                   np.int32 if inp.type == "tensor(int32)" else np.float32)}
        for _ in range(iters + 1):
            session.run(None, feed)
        with open(session.end_profiling()) as f:
            events = json.load(f)
    runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"][1:]  # first = warm-up
    if not runs:
        return {"by_op_us": {}, "by_class_us": {}, "by_kernel_class_us": {}, "charged_to_our_classes_us": 0.0,
                "run_us": float("nan"), "conv_by_kind_us": {}}
    per_run = [[] for _ in runs]
    for e in events:
        if not (e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time")):
            continue
        run = next((i for i, r in enumerate(runs) if r["ts"] <= e["ts"] <= r["ts"] + r["dur"]), None)
        if run is None:
            continue  # the warm-up run's
        op = e["args"]["op_name"]
        shapes = [next(iter(t.values())) for t in e["args"].get("input_type_shape", [])]
        # onnxruntime renames the nodes it rewrites (NCHWc...): classify by weight shape
        kind = conv_kind(shapes[1]) if "Conv" in op and len(shapes) > 1 and len(shapes[1]) >= 3 else None
        per_run[run].append((op, op_class(op, kind), e["dur"], e["name"][:-len("_kernel_time")]))
    return {**_peer_profile(per_run, charging, kernel_outputs), "run_us": statistics.median(r["dur"] for r in runs)}


def openvino_by_op(onnx_path: str, model, x: np.ndarray, threads: int, iters: int,
                   charging: Optional[Charging] = None) -> Dict[str, object]:
    """OpenVINO fp32 (openvino_peer.compiled_model with PERF_COUNT on) on the standard ONNX file
    at `onnx_path`; `model`: that file's ONNX model, for the conv kinds; `charging`: as for
    onnxruntime_by_op."""
    from openvino_peer import compiled_model
    compiled = compiled_model(onnx_path, threads, "fp32", profile=True)
    request = compiled.create_infer_request()
    (inp,) = compiled.inputs
    feed = np.ascontiguousarray(x.astype(inp.get_element_type().to_dtype()))
    request.infer({0: feed})
    kinds = conv_kinds(model)
    readings, run_us = [_openvino_layer_means(request.get_profiling_info(), kinds)], []
    for _ in range(iters):
        request.infer({0: feed})
        run_us.append(request.latency * 1e3)  # ms of the last inference
        readings.append(_openvino_layer_means(request.get_profiling_info(), kinds))
    return {**_peer_profile(runs_from_running_means(readings), charging), "run_us": statistics.median(run_us)}


def runs_from_running_means(readings: List[Dict[str, Tuple[str, str, float]]]) -> List[List[Tuple[str, str, float, str]]]:
    """OpenVINO's CPU plugin reports each layer's mean time over every inference of the infer
    request so far (integer µs), so one run's time is the difference of two running totals:
    readings[k - 1] = {layer: (op, class, mean µs over k inferences)}, k = 1..n; returns runs
    2..n as (op, class, µs, layer) lists (the first, a warm-up, only starts the totals)."""
    def totals(k, reading):
        return {layer: (op, cls, mean * k) for layer, (op, cls, mean) in reading.items()}
    runs = []
    for k in range(2, len(readings) + 1):
        before, after = totals(k - 1, readings[k - 2]), totals(k, readings[k - 1])
        runs.append([(op, cls, max(0.0, total - before.get(layer, (op, cls, 0.0))[2]), layer)
                     for layer, (op, cls, total) in after.items()])
    return runs


def _openvino_layer_means(layers, kinds: Dict[str, str]) -> Dict[str, Tuple[str, str, float]]:
    """{layer: (op, class, mean µs)} of the executed layers of a get_profiling_info()."""
    import openvino as ov
    out = {}
    for layer in layers:
        if layer.status != ov.ProfilingInfo.Status.EXECUTED:
            continue  # fused into another layer, or a constant / parameter
        kind = None
        if "Conv" in layer.node_type:
            kind = kind_of_layer(layer.node_name, kinds) or ("depthwise (kernel unknown)"
                                                             if "_dw" in layer.exec_type else None)
        out[layer.node_name] = (layer.node_type, op_class(layer.node_type, kind), layer.real_time.total_seconds() * 1e6)
    return out
