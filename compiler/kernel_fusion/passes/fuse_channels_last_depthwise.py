"""A blocked depthwise convolution between channels-last tensors, followed by LayerNormalization
over the channels -> one ChannelsLastDepthwiseConv with the normalization as its epilogue:

    ToNchwc(channels_last)(X) -> NchwcConv(depthwise) -> FromNchwc(channels_last) -> LayerNormalization(axis -1)
        ==>  ChannelsLastDepthwiseConv(X, W, B, gamma, beta, layer_norm = 1)

ConvNeXt's blocks (after fold_transposes_into_nchwc_reorders) keep their residual stream
channels last and reorder it to NCHW8c for the depthwise 7x7 alone, then back for the
LayerNormalization: two reorders and a separate normalization pass per block. The new step
reads the stream as it is and normalizes each finished pixel in L1 (docs/benchmarks.md, "What
runs around ConvNeXt's GEMMs").

X is the ToNchwc's input, or, when the blocked input comes from another step (a stage's first
block reads the downsampling convolution), the output of a FromNchwc(channels_last) of it that
the graph already has (the residual). Rewritten only when: the NchwcConv is depthwise (group =
C) with no Sum, input scale or activation; its output is read only by the FromNchwc, and that
one's only by a LayerNormalization over the last axis with Y as its only output and a scale
(and bias) of shape [C]; neither intermediate is a graph output. The ToNchwc goes when nothing
else reads it. Any window the NchwcConv has is kept (the kernel has tiles for 3/5/7 wide,
stride 1 or 2, and a generic loop for the rest)."""
from typing import Optional, Tuple

import onnx
from onnx import helper

from compiler.converter.pass_registry import register
from compiler.converter.passes.sort_graph import sort_graph
from compiler.onnx_graph import nchwc
from compiler.onnx_graph.graph_edit import consumers, producers, remove_nodes, remove_value_info
from compiler.onnx_graph.internal_ops import DOMAIN
from compiler.onnx_graph.type_inference import infer_types

_DEFAULT_DOMAINS = ("", "ai.onnx")
_WINDOW_ATTRS = ("kernel_shape", "strides", "dilations", "pads")


@register("fuse_channels_last_depthwise", kind="fuse")
def fuse_channels_last_depthwise(model, ctx):
    """Channels-last reorders around a blocked depthwise conv + LayerNormalization -> ChannelsLastDepthwiseConv."""
    graph = model.graph
    if not any(n.op_type == "NchwcConv" and n.domain == DOMAIN for n in graph.node):
        return model
    types = infer_types(model, model_name=ctx.model_name).types
    outputs = {o.name for o in graph.output}
    made_by, readers = producers(graph), consumers(graph)
    doomed, dropped_values = [], []
    for conv in list(graph.node):
        c = _depthwise_channels(conv, types)
        if c is None or conv.output[0] in outputs:
            continue
        source = _channels_last_source(conv.input[0], made_by, readers)
        chain = _reorder_and_layernorm(conv, c, readers, outputs, types)
        if source is None or chain is None:
            continue
        x, to_nchwc = source
        from_nchwc, ln = chain
        bias = conv.input[2] if len(conv.input) > 2 else ""
        inputs = [x, conv.input[1], bias, ln.input[1], ln.input[2] if len(ln.input) > 2 else ""]
        while inputs[-1] == "":
            inputs.pop()
        fused = helper.make_node("ChannelsLastDepthwiseConv", inputs, [ln.output[0]], name=conv.name, domain=DOMAIN)
        fused.attribute.extend(a for a in conv.attribute if a.name in _WINDOW_ATTRS)
        fused.attribute.append(helper.make_attribute("layer_norm", 1))
        fused.attribute.append(helper.make_attribute("epsilon", float(_attr(ln, "epsilon", 1e-5))))
        graph.node.insert(list(graph.node).index(ln), fused)
        doomed += [conv, from_nchwc, ln]
        dropped_values += [conv.output[0], from_nchwc.output[0]]
        readers[conv.input[0]].remove(conv)
        if to_nchwc is not None and not readers[conv.input[0]] and conv.input[0] not in outputs:
            doomed.append(to_nchwc)
            dropped_values.append(conv.input[0])
        ctx.logger.debug("fuse_channels_last_depthwise: '%s' reads %s channels last, LayerNormalization '%s' fused",
                         conv.name, x, ln.name)
    remove_value_info(graph, dropped_values)
    remove_nodes(graph, doomed)
    if doomed:  # a FromNchwc read as X may come after the LayerNormalization's place
        sort_graph(model, ctx)
    return model


def _attr(node: onnx.NodeProto, name: str, default):
    return next((helper.get_attribute_value(a) for a in node.attribute if a.name == name), default)


def _channels_last(node: Optional[onnx.NodeProto], op_type: str) -> bool:
    return (node is not None and node.op_type == op_type and node.domain == DOMAIN
            and int(_attr(node, "channels_last", 0)) == 1)


def _depthwise_channels(conv: onnx.NodeProto, types) -> Optional[int]:
    """C of a depthwise NchwcConv on a blocked X without Sum, input scale or activation, else None."""
    if conv.op_type != "NchwcConv" or conv.domain != DOMAIN or len(conv.input) > 3:
        return None
    act = _attr(conv, "activation", b"")
    if (act.decode() if isinstance(act, bytes) else act) not in ("", "none"):
        return None
    x = types.get(conv.input[0])
    if x is None or not x.is_static or len(x.shape) != 5 or x.shape[4] != nchwc.BLOCK:
        return None
    c = x.shape[1] * nchwc.BLOCK
    return c if int(_attr(conv, "group", 1)) == c else None


def _channels_last_source(blocked: str, made_by, readers) -> Optional[Tuple[str, Optional[onnx.NodeProto]]]:
    """(X channels last, the ToNchwc that made `blocked` of it or None) or None when there is none."""
    to_nchwc = made_by.get(blocked)
    if _channels_last(to_nchwc, "ToNchwc"):
        return to_nchwc.input[0], to_nchwc
    for reader in readers.get(blocked, []):
        if _channels_last(reader, "FromNchwc"):
            return reader.output[0], None
    return None


def _reorder_and_layernorm(conv, c: int, readers, outputs, types):
    """(FromNchwc, LayerNormalization) after `conv` as the module docstring says, else None."""
    after = readers.get(conv.output[0], [])
    if len(after) != 1 or not _channels_last(after[0], "FromNchwc"):
        return None
    from_nchwc = after[0]
    after = readers.get(from_nchwc.output[0], [])
    if from_nchwc.output[0] in outputs or len(after) != 1:
        return None
    ln = after[0]
    if (ln.op_type != "LayerNormalization" or ln.domain not in _DEFAULT_DOMAINS or ln.input[0] != from_nchwc.output[0]
            or any(ln.output[1:]) or int(_attr(ln, "axis", -1)) not in (-1, 3)):
        return None
    for name in ln.input[1:]:
        t = types.get(name) if name else None
        if name and (t is None or not t.is_static or list(t.shape) != [c]):
            return None
    return from_nchwc, ln
