"""A subsample of a stride-1 NchwcConv's output that nothing else reads ==> the convolution
computes only the subsampled pixels: it takes the subsample's strides, its residual Sum read
through a subsample of its own.

Pixel (i, j) of a convolution with strides s is pixel (s·i, s·j) of the same convolution with
strides 1 (same window, pads and dilations; the output sizes agree too), and the epilogue (bias,
Sum, activation) is pixel by pixel. ResNet's stage boundary: the next stage's first block reads
the last block's output only through the subsample step of share_strided_subsample (its first
1x1 and its shortcut, both stride 2), so three quarters of that block's expanding 1x1 were
computed and dropped, and of its 3x3 too. Two rewrites, repeated while one applies:

- a subsample step (NchwcMaxPool, 1x1 window, no pads, dilations 1, strides not all 1, no
  zero_pads) of a 1x1 unpadded NchwcConv: the step goes, the convolution takes its strides and
  writes its tensor (it reads X strided: its kernel copies what it reads on narrow rows);
- a strided 1x1 unpadded NchwcConv reading a stride-1 NchwcConv of any window: the producer
  takes the strides, the reader runs at stride 1. The producer then runs as a direct
  convolution instead of Winograd (to_winograd_conv, after this pass, takes stride 1 only).

The producer: group 1, dilations 1, no input scale, no attributes beyond the window's and the
epilogue's, one output that is no graph output and has that one reader. Its Sum, if any, is
read through a new subsample NchwcMaxPool placed right before it. Through a 1x1 producer every
value left is computed as before (bit for bit); through a 3x3 the direct convolution replaces
Winograd's arithmetic. Measured on ResNet50 b1 (docs/benchmarks.md, "A stage's last block
computes only the pixels the next stage reads").
"""
from typing import Dict, List

import onnx
from onnx import helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph.graph_edit import fresh_name, names_in_use
from compiler.onnx_graph.internal_ops import DOMAIN

_SUM_INPUT = 3  # NchwcConv: X, W, B, Sum[, S]
_CONV_ATTRS = {"kernel_shape", "strides", "dilations", "pads", "group", "activation", "activation_params"}


@register("subsample_into_producer", kind="fuse")
def subsample_into_producer(model, ctx):
    """Stride-1 NchwcConvs read only through a subsample (a step or a strided 1x1) compute only its pixels."""
    graph = model.graph
    graph_outputs = {o.name for o in graph.output}
    taken = names_in_use(graph)
    dropped = set()  # outputs of the subsample steps taken over by their producer (which now writes them)
    sum_steps = {}  # a Sum's subsample -> its step, placed before the convolution that reads it

    def is_dropped(node):
        return node.op_type == "NchwcMaxPool" and node.output[0] in dropped

    changed = True
    while changed:
        changed = False
        producer: Dict[str, onnx.NodeProto] = {o: n for n in graph.node if not is_dropped(n) for o in n.output}
        readers: Dict[str, List[onnx.NodeProto]] = {}
        for node in [n for n in graph.node if not is_dropped(n)] + list(sum_steps.values()):
            for name in node.input:
                readers.setdefault(name, []).append(node)
        for reader in graph.node:
            if is_dropped(reader):
                continue
            is_pool = True
            strides = _subsample_strides(reader)
            if strides is None:
                strides, is_pool = _strided_pointwise(reader), False
            if strides is None:
                continue
            y = reader.input[0]
            conv = producer.get(y)
            if (conv is None or y in graph_outputs or len(readers.get(y, [])) != 1 or len(conv.output) != 1
                    or not _stride_1(conv, any_window=not is_pool)):
                continue
            sh, sw = strides
            _set_ints(conv, "strides", [sh, sw])
            if len(conv.input) > _SUM_INPUT and conv.input[_SUM_INPUT]:
                s = conv.input[_SUM_INPUT]
                sub = fresh_name(f"{s}__subsample{sh}x{sw}", taken)
                step = helper.make_node("NchwcMaxPool", [s], [sub], fresh_name(f"{conv.name}__sum_subsample", taken),
                                        domain=DOMAIN, kernel_shape=[1, 1], strides=[sh, sw], dilations=[1, 1],
                                        pads=[0, 0, 0, 0])
                sum_steps[sub] = step
                conv.input[_SUM_INPUT] = sub
            if is_pool:
                dropped.add(reader.output[0])
                conv.output[0] = reader.output[0]
            else:
                _set_ints(reader, "strides", [1, 1])
            _drop_value_info(graph, y)
            ctx.logger.debug("subsample_into_producer: %s computes %s subsampled %dx%d", conv.name, y, sh, sw)
            changed = True
            break
    if dropped or sum_steps:
        ordered = []
        for node in graph.node:
            if is_dropped(node):
                continue
            if node.op_type == "NchwcConv" and len(node.input) > _SUM_INPUT and node.input[_SUM_INPUT] in sum_steps:
                ordered.append(sum_steps[node.input[_SUM_INPUT]])
            ordered.append(onnx.NodeProto())
            ordered[-1].CopyFrom(node)
        del graph.node[:]
        graph.node.extend(ordered)
    return model


def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _subsample_strides(node: onnx.NodeProto):
    """The strides of an NchwcMaxPool that copies every s-th pixel (a 1x1 window), else None."""
    if node.op_type != "NchwcMaxPool" or node.domain != DOMAIN or len(node.input) != 1 or len(node.output) != 1:
        return None
    attrs = _attrs(node)
    if (list(attrs.get("kernel_shape", [])) != [1, 1] or list(attrs.get("dilations", [1, 1])) != [1, 1]
            or any(int(p) for p in attrs.get("pads", [0, 0, 0, 0])) or int(attrs.get("zero_pads", 0))
            or int(attrs.get("ceil_mode", 0))):
        return None
    return _non_unit_strides(attrs)


def _strided_pointwise(node: onnx.NodeProto):
    """The strides of a plain 1x1 unpadded NchwcConv (_plain_conv_attrs) with strides not all 1,
    else None."""
    attrs = _plain_conv_attrs(node)
    if attrs is None or not _pointwise_unpadded(attrs):
        return None
    return _non_unit_strides(attrs)


def _stride_1(node: onnx.NodeProto, any_window: bool) -> bool:
    """A plain NchwcConv (_plain_conv_attrs) with strides 1: 1x1 and unpadded unless any_window."""
    attrs = _plain_conv_attrs(node)
    if attrs is None or list(attrs.get("strides", [1, 1])) != [1, 1]:
        return False
    return any_window or _pointwise_unpadded(attrs)


def _plain_conv_attrs(node: onnx.NodeProto):
    """The attributes of a group-1 NchwcConv with dilations 1, no input scale and no attributes
    beyond the window's and the epilogue's, else None."""
    if node.op_type != "NchwcConv" or node.domain != DOMAIN or len(node.input) > _SUM_INPUT + 1:
        return None
    attrs = _attrs(node)
    if (not set(attrs) <= _CONV_ATTRS or list(attrs.get("dilations", [1, 1])) != [1, 1]
            or int(attrs.get("group", 1)) != 1):
        return None
    return attrs


def _pointwise_unpadded(attrs: dict) -> bool:
    return list(attrs.get("kernel_shape", [])) == [1, 1] and not any(int(p) for p in attrs.get("pads", [0, 0, 0, 0]))


def _non_unit_strides(attrs: dict):
    strides = [int(s) for s in attrs.get("strides", [1, 1])]
    return tuple(strides) if len(strides) == 2 and strides != [1, 1] else None


def _set_ints(node: onnx.NodeProto, name: str, values) -> None:
    for a in node.attribute:
        if a.name == name:
            a.CopyFrom(helper.make_attribute(name, values))
            return
    node.attribute.append(helper.make_attribute(name, values))


def _drop_value_info(graph: onnx.GraphProto, name: str) -> None:
    """The tensor is no longer written: its recorded type goes too."""
    for i in reversed(range(len(graph.value_info))):
        if graph.value_info[i].name == name:
            del graph.value_info[i]
