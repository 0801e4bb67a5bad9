"""Op classes: the common names under which ModelRunner's, onnxruntime's and OpenVINO's per-op
profiles are compared. Each runtime names its kernels its own way (NchwcConv / FusedConv /
Convolution, FusedMatMul / FullyConnected, FusedElementwise / Eltwise / Subgraph...) and fuses
different neighbours into them (an activation into the convolution before it, a chain of
elementwise ops into one kernel), so only classes compare: a class is charged with whatever each
runtime fused into its kernels. Convolutions are split by kind and kernel size (conv_kind), the
ones the op patterns of the CNN families differ in."""
import collections
from typing import Dict, List, Optional

CLASSES = {
    "MatMul/Gemm": {"MatMul", "FusedMatMul", "Gemm", "FullyConnected", "Einsum", "MatMulInteger", "BatchMatMul"},
    "Attention (fused)": {"Attention", "MultiHeadAttention", "ScaledDotProductAttention", "FusedAttention"},
    "Softmax": {"Softmax", "LogSoftmax", "SoftMax"},
    "Normalization": {"LayerNormalization", "SkipLayerNormalization", "SimplifiedLayerNormalization", "MVN",
                      "BatchNormalization", "BatchNormInference", "InstanceNormalization", "NormalizeL2"},
    "Pooling/reduce": {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Pooling", "AvgPool",
                       "ReduceMean", "ReduceMax", "ReduceSum", "Reduce", "ReduceL2"},
    "Concat": {"Concat", "Concatenation"},
    # expand 1x1 + depthwise + project 1x1 in one step (ours); the peers' are in the Conv classes
    "Inverted-residual block (fused)": {"NchwcInvertedResidual"},
    "Layout/copy": {"Transpose", "Reshape", "Reorder", "ReorderInput", "ReorderOutput", "ToNchwc", "FromNchwc",
                    "Flatten", "Squeeze", "Unsqueeze", "Slice", "Split", "Pad", "Gather", "Expand", "Tile",
                    "StridedSlice", "Identity", "Cast", "Convert", "Transpose2", "Broadcast", "Shape", "ShapeOf"},
}
ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "Relu", "Clip", "Sigmoid", "Tanh", "Erf", "Gelu", "HardSigmoid",
               "HardSwish", "Swish", "FusedElementwise", "Eltwise", "Subgraph", "BiasGelu", "FastGelu",
               "QuickGelu", "Sqrt", "Pow", "Exp", "Where", "Less", "Not", "Equal", "Max", "Min", "Neg", "Abs",
               "Softplus", "LeakyRelu", "PRelu", "Elu", "Sum", "Mean", "Relu6", "Select", "Multiply", "Power",
               "Greater", "LogicalNot", "Reciprocal", "Mish", "Round", "Floor"}
_CLASS_OF = {op: cls for cls, ops in CLASSES.items() for op in ops}
_CLASS_OF.update({op: "Elementwise" for op in ELEMENTWISE})


def conv_kind(weight) -> str:
    """From the weight shape [C_out, C_in / group, k...]: "1x1", "3x3"..., or "depthwise 3x3"...
    (one input channel per output channel with a spatial kernel: the only grouped convolutions
    of these networks)."""
    kernel = "x".join(str(k) for k in weight[2:]) or "1"
    if weight[1] == 1 and weight[0] > 1:  # a 1x1 one is a per-channel affine (DenseNet's BatchNorms)
        return f"depthwise {kernel}"
    return kernel


def op_class(op: str, conv: Optional[str] = None) -> str:
    """The class of a profiled op type; `conv`: the convolution's conv_kind where known."""
    if "Conv" in op or op == "Deconvolution":
        return f"Conv {conv}" if conv else "Conv (kind unknown)"
    if op.startswith("Nchwc") and op[len("Nchwc"):] in _CLASS_OF:  # the blocked-layout variant of an op
        return _CLASS_OF[op[len("Nchwc"):]]
    return _CLASS_OF.get(op, f"other: {op}")


def by_class(entries: List[tuple]) -> Dict[str, float]:
    """{class: µs} from (class, µs) pairs, largest first."""
    out = collections.Counter()
    for cls, us in entries:
        out[cls] += us
    return dict(out.most_common())


def compare(ours: Dict[str, float], peers: Dict[str, Dict[str, float]], limit: float = 1.5,
            min_share: float = 0.02) -> List[dict]:
    """One row per class of ours (largest first), then the classes only peers have: our µs,
    each peer's µs and our ratio to it, and the peers it is flagged against: ratio above `limit`
    on a class holding at least `min_share` of our profiled run (smaller ones are within the
    profilers' noise). A class a side has no time for (it fused that work into another class)
    gets no ratio."""
    total = sum(ours.values()) or 1.0
    peer_only = sorted({cls for by in peers.values() for cls in by} - set(ours),
                       key=lambda cls: -max(by.get(cls, 0.0) for by in peers.values()))
    rows = []
    for cls, us in sorted(ours.items(), key=lambda kv: -kv[1]) + [(cls, 0.0) for cls in peer_only]:
        ratios = {peer: us / by[cls] for peer, by in peers.items() if by.get(cls, 0) > 0 and us > 0}
        rows.append({"class": cls, "ours_us": us, "share": us / total,
                     "peers_us": {peer: by.get(cls, 0.0) for peer, by in peers.items()}, "ratios": ratios,
                     "flagged": sorted(p for p, r in ratios.items() if r > limit and us / total >= min_share)})
    return rows


# -- Charging the peers' nodes to our steps -----------------------------------------------------
# Each runtime fuses different ONNX nodes into its kernels: ours the stem's swish into its
# convolution, ConvNeXt's LayerNorm into the depthwise convolution before it; onnxruntime runs
# those as separate Sigmoid / Mul / ReduceMean... nodes. A class compared kernel by kernel then
# holds more ONNX nodes on our side than on the peer's. So the peers' time is charged by our
# partition of the graph: each ONNX node the peers run is charged to the class of the step of
# ours that computes it (both sides then hold the same nodes in a class); nodes no step of ours
# computes (a peer's layout reorders, names it made up) keep the class of the peer's kernel.


def nodes_by_step(nodes: List[tuple], step_outputs: Dict[str, List[str]], sources,
                  step_inputs: Optional[Dict[str, List[str]]] = None) -> Dict[str, str]:
    """{ONNX node name: the step of ours that computes it}. `nodes`: (name, inputs, outputs) of the
    graph the peers run; `step_outputs`: {step: the graph tensors it writes} in program order (a
    step writing a tensor under another layout counts as writing that tensor); `sources`: graph
    inputs and initializers. A step computes the nodes between the tensors it writes and the
    tensors it reads that something else wrote: walking up from its outputs through producers
    whose outputs no step writes. A node two steps reach belongs to the first.

    `step_inputs` ({step: the tensors it reads}) places the nodes of a step that writes no graph
    tensor, only one of its own that a later step reads, from weights of its own (the three Q/K/V
    projections merged into one GEMM over the weights side by side, whose output the fused
    attention reads): the walk from the reader's outputs reaches them, so the reader's nodes that
    read what that step reads (and whose outputs no step writes) are that step's."""
    producer = {out: name for name, _, outs in nodes for out in outs}
    inputs_of = {name: ins for name, ins, _ in nodes}
    written = {t for outs in step_outputs.values() for t in outs} | set(sources)
    owner: Dict[str, str] = {}
    for step, outs in step_outputs.items():
        stack = [producer[t] for t in outs if t in producer]
        seen = set()
        while stack:
            node = stack.pop()
            if node in seen:
                continue
            seen.add(node)
            owner.setdefault(node, step)
            stack += [producer[t] for t in inputs_of[node] if t in producer and t not in written]
    outputs_of = {name: outs for name, _, outs in nodes}
    for step, outs in step_outputs.items() if step_inputs else ():
        reads = set(step_inputs.get(step, ()))
        # only a step with weights of its own (merged ones): not a layout copy feeding a kernel
        if any(t in producer for t in outs) or not reads - set(producer) - written:
            continue
        readers = {s for s, ins in step_inputs.items() if s != step and set(outs) & set(ins)}
        for node, at in list(owner.items()):
            if at in readers and reads & set(inputs_of[node]) and not set(outputs_of[node]) & written:
                owner[node] = step
    return owner


def peer_node(name: str, node_names, producer: Dict[str, str], suffixes=("_nchwc",)) -> Optional[str]:
    """The ONNX node a peer's profiled kernel stands for: its own name, the producer of the tensor
    it is named after (onnxruntime names the nodes its NCHWc transformer rewrites "<output>_nchwc"),
    or for OpenVINO's "<node>/<part>" layer names the longest such prefix that is one."""
    candidates = [name] + [name[:-len(s)] for s in suffixes if name.endswith(s)]
    while True:
        for c in candidates:
            if c in node_names:
                return c
            if c in producer:
                return producer[c]
        if "/" not in candidates[0]:
            return None
        candidates = [candidates[0].rsplit("/", 1)[0]]


def charged_class(entry_class: str, node: Optional[str], class_of_node: Dict[str, str]) -> str:
    """The class a peer kernel's time is charged to: that of the step of ours computing its node
    (class_of_node), else the kernel's own."""
    return class_of_node.get(node, entry_class) if node else entry_class
