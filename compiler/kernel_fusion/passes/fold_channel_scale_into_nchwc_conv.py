"""Mul(X, S) -> NchwcConv(group 1) ==> NchwcConv(X, ..., S): squeeze-and-excite's excitation
(X's channels scaled per image by the gate S) moves into the convolution that reads the scaled
tensor, which multiplies each work item's copy of its weights by the image's scales instead
(W'[o, c] = W[o, c]·S[n, c], the kernel's has_input_scale). The Mul was a whole extra pass over
the block's largest activation, written and read back once more; scaling costs one multiply per
weight per work item, on weights already in cache for that item (docs/benchmarks.md,
"Squeeze-and-excite blocks").

Rewritten (the blocked nodes written by to_nchwc_layout, which runs before): a Mul whose
operands are X, blocked [N, C/8, H, W, 8], and S [N, C/8, 1, 1, 8] (either order, same float
type, static shapes, N the same), whose output is read only by NchwcConvs with group 1 that
take it as X and no S yet, and is no graph output. Each such reader gets X as its input and S
as its input 4; the Mul goes. A Mul with a constant or broadcast-over-batch S, or read by
anything else, is left as it is.

Where it pays, as measured on EfficientNetB0 224 (b1 and b8, 2 threads, per step): in float16
on every stage (chosen when the Mul's float16 pass cost more than the weight copies; with the
Mul widened in registers, float32's rule in float16 measured level, so the rule stands); in
float32 where a convolution's pixels per image are at least F32_MIN_PIXELS_PER_OUTPUT times its
output channels (the 112² to 14² stages): the copies scale C·M weights per image where the Mul reads
and writes C·H·W values. On the 7² stages (49 pixels, 192-320 outputs) the copies of the larger
weights cost the convolution more than the Mul they replace, since float32 weights are
otherwise read in place (docs/benchmarks.md, "Squeeze-and-excite blocks")."""
from typing import Optional, Tuple

import onnx
from onnx import TensorProto, helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph import nchwc
from compiler.onnx_graph.graph_edit import consumers, remove_nodes
from compiler.onnx_graph.internal_ops import DOMAIN
from compiler.onnx_graph.type_inference import infer_types

_DEFAULT_DOMAINS = ("", "ai.onnx")
_SCALE_INPUT = 4
F32_MIN_PIXELS_PER_OUTPUT = 1


@register("fold_channel_scale_into_nchwc_conv", kind="fuse")
def fold_channel_scale_into_nchwc_conv(model, ctx):
    """Squeeze-and-excite's Mul(X, S) folded into the group-1 NchwcConv reading its output."""
    graph = model.graph
    if not any(n.op_type == "NchwcConv" and n.domain == DOMAIN for n in graph.node):
        return model
    types = infer_types(model, model_name=ctx.model_name).types
    readers = consumers(graph)
    outputs = {o.name for o in graph.output}
    doomed = []
    for node in graph.node:
        if node.op_type != "Mul" or node.domain not in _DEFAULT_DOMAINS or node.output[0] in outputs:
            continue
        operands = _operands(node, types)
        convs = readers.get(node.output[0], [])
        if (operands is None or not convs or not all(_takes_scale(c, node.output[0]) for c in convs)
                or not all(_pays(types[operands[0]], c, types) for c in convs)):
            continue
        x, s = operands
        for conv in convs:
            while len(conv.input) < _SCALE_INPUT:
                conv.input.append("")
            conv.input[0] = x
            conv.input.append(s)
        doomed.append(node)
        ctx.logger.debug("fold_channel_scale_into_nchwc_conv: Mul '%s' folded into %s", node.name,
                         [c.name for c in convs])
    remove_nodes(graph, doomed)
    return model


def _operands(node: onnx.NodeProto, types) -> Optional[Tuple[str, str]]:
    """(X, S) of a Mul of a blocked tensor by a per-image, per-channel one, else None."""
    if len(node.input) != 2:
        return None
    for x, s in ((node.input[0], node.input[1]), (node.input[1], node.input[0])):
        tx, ts = types.get(x), types.get(s)
        if tx is None or ts is None or not (tx.is_static and ts.is_static) or tx.elem_type != ts.elem_type:
            continue
        xs, ss = list(tx.shape), list(ts.shape)
        if len(xs) == 5 and xs[4] == nchwc.BLOCK and ss == [xs[0], xs[1], 1, 1, nchwc.BLOCK]:
            return x, s
    return None


def _pays(x, conv: onnx.NodeProto, types) -> bool:
    """The measured rule: float16 always; float32 when H·W >= F32_MIN_PIXELS_PER_OUTPUT · M."""
    if x.elem_type == TensorProto.FLOAT16:
        return True
    y = types.get(conv.output[0])
    outputs = y.shape[1] * nchwc.BLOCK if y is not None and y.is_static else None
    return outputs is not None and x.shape[2] * x.shape[3] >= F32_MIN_PIXELS_PER_OUTPUT * outputs


def _takes_scale(conv: onnx.NodeProto, name: str) -> bool:
    """A group-1 NchwcConv reading `name` as X (only), without an input scale yet."""
    if conv.op_type != "NchwcConv" or conv.domain != DOMAIN or conv.input[0] != name or list(conv.input[1:]).count(name):
        return False
    group = next((helper.get_attribute_value(a) for a in conv.attribute if a.name == "group"), 1)
    return int(group) == 1 and len(conv.input) <= _SCALE_INPUT
