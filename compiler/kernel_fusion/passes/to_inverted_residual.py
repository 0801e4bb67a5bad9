"""NchwcConv(1x1) -> NchwcConv(depthwise) -> NchwcConv(1x1) [+ the first one's input as Sum] ->
NchwcInvertedResidual (compiler/onnx_graph/inverted_residual.py): MobileNetV2's inverted-residual
block in one step, so the runtime keeps the expanded activation in cache band by band instead
of writing and reading it through memory twice. Where the depthwise's output goes elsewhere
than one project (EfficientNet's MBConv: squeeze-and-excite reads it whole, then the project),
the expand -> depthwise pair alone becomes an NchwcInvertedResidual without the project stage
(5 inputs; its output is the depthwise's), so the expanded activation still stays in cache.

Rewritten (the NchwcConvs written by to_nchwc_layout, which runs before), per the policy
(PassContext.inverted_residual, CompilerOptions.inverted_residual):
  auto  the blocks of batches that measured faster fused (should_fuse: one image, or at least
        MIN_IMAGES; docs/benchmarks.md, "Fused inverted-residual blocks"), the three steps elsewhere;
  all   every matching block (for measuring);
  off   none (the pass is left out of the pipeline).
A block matches when: the expand is a blocked 1x1, stride 1, unpadded, group-1 NchwcConv; the
depthwise reads only its output and has dilations 1; the project is a blocked 1x1 group-1
NchwcConv reading only the depthwise's output, with no Sum or with the expand's input as Sum
(the residual); neither intermediate is a graph output; no stage but the project has a Sum or an
input scale; every activation is one the tiles apply in registers (inverted_residual.ACTIVATIONS);
all tensors float32 or float16. A pair matches the same way without the project: the depthwise's
output may have any readers. A missing bias becomes zeros. Policy auto fuses pairs per
should_fuse_pair."""
from typing import Dict, List, Optional

import numpy as np
import onnx
from onnx import TensorProto, helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph import inverted_residual, nchwc
from compiler.onnx_graph.graph_edit import consumers, producers, remove_nodes
from compiler.onnx_graph.graph_rewrite import GraphRewrite
from compiler.onnx_graph.internal_ops import DOMAIN
from compiler.onnx_graph.type_inference import infer_types

_NUMPY = {TensorProto.FLOAT: np.float32, TensorProto.FLOAT16: np.float16}


# The batches policy auto fuses, as measured on MobileNetV2 224, 2 threads
# (benchmarks/bench_inverted_residual.py; docs/benchmarks.md "Fused inverted-residual blocks"),
# through the model against the three steps: batch 1 (each image cut into one run of rows per
# thread) 0.92x in fp32 and 0.91x in fp16; batch 8 (whole images per work item, 4 per thread)
# 0.75x and 0.93x. Batches between were not measured (with fewer images than a multiple of the
# threads, whole-image items would leave a thread idle) and stay unfused.
MIN_IMAGES = 8


def should_fuse(n: int) -> bool:
    """The measured rule of policy auto for a block on n images."""
    return n == 1 or n >= MIN_IMAGES


# The batches policy auto fuses expand -> depthwise pairs at, as measured on EfficientNetB0 224,
# 2 threads (benchmarks/bench_inverted_residual.py --model efficientnet_b0; docs/benchmarks.md
# "Fused expand -> depthwise pairs"), the 15 pairs' profiled time fused against their two steps:
# batch 1 (each image cut into runs of expanded channels, one per thread) 0.88x in fp32 and 0.94x
# in fp16; batch 8 (whole images per work item) 0.93x and 0.93x. Batch 2 measured 1.25x in fp32
# (0.98x in fp16) and batch 4 0.86x (1.01x), so batches between stay unfused, as for whole blocks.
def should_fuse_pair(n: int) -> bool:
    """The measured rule of policy auto for an expand -> depthwise pair on n images."""
    return n == 1 or n >= MIN_IMAGES


@register("to_inverted_residual", kind="fuse")
def to_inverted_residual(model, ctx):
    """Expand 1x1 -> depthwise -> project 1x1 [+ residual] NchwcConv chains -> NchwcInvertedResidual."""
    policy = ctx.inverted_residual
    if policy == "off" or not any(n.op_type == "NchwcConv" and n.domain == DOMAIN for n in model.graph.node):
        return model
    rewrite = GraphRewrite(model, ctx.model_name)
    types = infer_types(model, model_name=ctx.model_name).types
    made = producers(model.graph)
    readers = consumers(model.graph)
    doomed: List[onnx.NodeProto] = []
    taken = set()  # ids of the depthwise NchwcConvs a whole block took
    for project in list(model.graph.node):
        block = _match(project, made, readers, rewrite.outputs, types)
        if block is None:
            continue
        expand, depthwise = block
        if policy == "auto" and not should_fuse(types[expand.input[0]].shape[0]):
            continue
        _fuse(rewrite, types, project, (expand, depthwise, project),
              residual=len(project.input) > 3 and bool(project.input[3]))
        doomed += [expand, depthwise]
        taken.add(id(depthwise))
    for depthwise in list(model.graph.node):
        expand = None if id(depthwise) in taken else _match_pair(depthwise, made, readers, rewrite.outputs, types)
        if expand is None:
            continue
        if policy == "auto" and not should_fuse_pair(types[expand.input[0]].shape[0]):
            continue
        _fuse(rewrite, types, depthwise, (expand, depthwise), residual=False)
        doomed.append(expand)
    remove_nodes(model.graph, doomed)
    return model


def _fuse(rewrite: GraphRewrite, types, last: onnx.NodeProto, stages, residual: bool) -> None:
    """Rewrites `last` (the project, or the depthwise of a pair) in place into the fused node of
    `stages` (expand, depthwise[, project]): its output's readers come after it."""
    expand, depthwise = stages[:2]
    dtype = _NUMPY[types[expand.input[0]].elem_type]
    inputs = [expand.input[0]]
    for node in stages:
        bias = node.input[2] if len(node.input) > 2 else ""
        if not bias:
            m = types[node.output[0]].shape[1] * nchwc.BLOCK
            bias = rewrite.add_initializer(f"{node.name or node.output[0]}__zero_bias", np.zeros(m, dtype))
        inputs += [node.input[1], bias]
    window = {k: v for k, v in _attrs(depthwise).items() if k in ("kernel_shape", "strides", "dilations", "pads")}
    fused = helper.make_node("NchwcInvertedResidual", inputs, [last.output[0]], name=last.name, domain=DOMAIN,
                             residual=int(residual), **window)
    for stage, node in zip(inverted_residual.STAGES, stages):
        attrs = _attrs(node)
        fused.attribute.append(helper.make_attribute(f"{stage}_activation", attrs.get("activation", b"")))
        if attrs.get("activation_params"):
            fused.attribute.append(helper.make_attribute(f"{stage}_activation_params",
                                                         [float(p) for p in attrs["activation_params"]]))
    last.CopyFrom(fused)


def _attrs(node: onnx.NodeProto) -> Dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _activation_ok(node: onnx.NodeProto) -> bool:
    name = _attrs(node).get("activation", b"")
    return (name.decode() if isinstance(name, bytes) else name) in inverted_residual.ACTIVATIONS


def _is_nchwc_conv(node: Optional[onnx.NodeProto]) -> bool:
    return node is not None and node.op_type == "NchwcConv" and node.domain == DOMAIN


def _only_reader(name: str, reader: onnx.NodeProto, readers, outputs) -> bool:
    return name not in outputs and [id(n) for n in readers.get(name, [])] == [id(reader)]


def _pointwise(node: onnx.NodeProto, types) -> bool:
    """A blocked-input 1x1, stride-1, unpadded, group-1 NchwcConv with static float tensors."""
    a = _attrs(node)
    x, y = types.get(node.input[0]), types.get(node.output[0])
    return (x is not None and y is not None and x.is_static and y.is_static and len(x.shape) == 5
            and x.elem_type in _NUMPY and int(a.get("group", 1)) == 1 and list(a.get("kernel_shape", [])) == [1, 1]
            and list(a.get("strides", [1, 1])) == [1, 1] and not any(a.get("pads", [0, 0, 0, 0]))
            and _activation_ok(node))


def _match(project: onnx.NodeProto, made, readers, outputs, types):
    """(expand, depthwise) when `project` ends a block this pass rewrites, else None."""
    if not _is_nchwc_conv(project) or not _pointwise(project, types) or len(project.input) > 4:
        return None
    depthwise = made.get(project.input[0])
    if not _is_nchwc_conv(depthwise) or not _only_reader(depthwise.output[0], project, readers, outputs):
        return None
    expand = _match_pair(depthwise, made, readers, outputs, types)
    if expand is None:
        return None
    if len(project.input) > 3 and project.input[3] and project.input[3] != expand.input[0]:
        return None
    return (expand, depthwise) if types[project.output[0]].elem_type == types[expand.input[0]].elem_type else None


def _no_extra_inputs(node: onnx.NodeProto) -> bool:
    """No Sum (input 3) and no input scale (input 4)."""
    return not any(node.input[3:])


def _match_pair(depthwise: onnx.NodeProto, made, readers, outputs, types) -> Optional[onnx.NodeProto]:
    """The expand when `depthwise` is a depthwise NchwcConv reading a fusable expand 1x1, else None."""
    if not _is_nchwc_conv(depthwise):
        return None
    a = _attrs(depthwise)
    x = types.get(depthwise.input[0])
    if (x is None or len(x.shape) != 5 or int(a.get("group", 1)) != x.shape[1] * nchwc.BLOCK
            or list(a.get("dilations", [1, 1])) != [1, 1] or not _activation_ok(depthwise)
            or not _no_extra_inputs(depthwise)):
        return None
    expand = made.get(depthwise.input[0])
    if (not _is_nchwc_conv(expand) or not _pointwise(expand, types)
            or not _only_reader(expand.output[0], depthwise, readers, outputs) or not _no_extra_inputs(expand)):
        return None
    d = types.get(depthwise.output[0])
    dtypes = {types[n].elem_type for n in (expand.input[0], expand.output[0])} | {d.elem_type if d else None}
    return expand if len(dtypes) == 1 else None
