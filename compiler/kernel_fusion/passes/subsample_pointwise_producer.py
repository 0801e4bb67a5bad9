"""A subsample step whose input is written by a 1x1 stride-1 NchwcConv that nothing else reads
==> that convolution computes only the subsampled pixels (its strides become the subsample's),
its residual Sum read through a subsample of its own.

A 1x1 convolution and its epilogue (bias, Sum, activation) are pixel by pixel, so the subsample
of the result is the result on the subsampled pixels: act(conv(X[::s], W) + B + Sum[::s]). In
ResNet the last block of a stage ends in such a convolution (its expanding 1x1 with the block's
residual Sum), and the next stage's first block reads its output only through the subsample
step of share_strided_subsample (the block's first 1x1 and its shortcut, both stride 2): three
quarters of that expanding convolution's pixels were computed and dropped. The convolution now
reads X strided (its kernel copies what it reads on narrow rows) and the Sum is subsampled by a
new NchwcMaxPool with a 1x1 window placed right before it; every value that remains is computed
as before, so the result is bit for bit the same.

Rewritten (after share_strided_subsample): an NchwcMaxPool with a 1x1 window, no pads,
dilations 1, strides not all 1 and no zero_pads, whose input is the only output of a blocked
group-1 1x1 NchwcConv with strides 1, dilations 1, no pads, no input scale and no attribute
beyond those and the epilogue's, read by nothing but that pool and no graph output.
"""
from typing import Dict, List

import onnx
from onnx import helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph.graph_edit import fresh_name, names_in_use
from compiler.onnx_graph.internal_ops import DOMAIN

_SUM_INPUT = 3  # NchwcConv: X, W, B, Sum[, S]
_CONV_ATTRS = {"kernel_shape", "strides", "dilations", "pads", "group", "activation", "activation_params"}


@register("subsample_pointwise_producer", kind="fuse")
def subsample_pointwise_producer(model, ctx):
    """1x1 NchwcConvs read only through a 1x1-window subsample compute only its pixels."""
    graph = model.graph
    producer: Dict[str, onnx.NodeProto] = {o: n for n in graph.node for o in n.output}
    readers: Dict[str, List[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    graph_outputs = {o.name for o in graph.output}
    taken = names_in_use(graph)
    dropped = set()  # id() of the subsample steps taken over by their producer
    sum_steps = {}  # id(convolution) -> the subsample step of its Sum, placed before it
    for pool in graph.node:
        strides = _subsample_strides(pool)
        if strides is None:
            continue
        y = pool.input[0]
        conv = producer.get(y)
        if (conv is None or y in graph_outputs or len(readers.get(y, [])) != 1 or len(conv.output) != 1
                or not _pointwise_stride_1(conv)):
            continue
        sh, sw = strides
        _set_ints(conv, "strides", [sh, sw])
        if len(conv.input) > _SUM_INPUT and conv.input[_SUM_INPUT]:
            s = conv.input[_SUM_INPUT]
            sub = fresh_name(f"{s}__subsample{sh}x{sw}", taken)
            step = onnx.NodeProto()
            step.CopyFrom(pool)
            step.name = fresh_name(f"{conv.name}__sum_subsample", taken)
            step.input[0] = s
            step.output[0] = sub
            sum_steps[id(conv)] = step
            conv.input[_SUM_INPUT] = sub
        conv.output[0] = pool.output[0]
        dropped.add(id(pool))
        _drop_value_info(graph, y)
        ctx.logger.debug("subsample_pointwise_producer: %s computes %s subsampled %dx%d", conv.name, y, sh, sw)
    if dropped:
        ordered = []
        for node in graph.node:
            if id(node) in dropped:
                continue
            if id(node) in sum_steps:
                ordered.append(sum_steps[id(node)])
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
    strides = [int(s) for s in attrs.get("strides", [1, 1])]
    return tuple(strides) if len(strides) == 2 and strides != [1, 1] else None


def _pointwise_stride_1(node: onnx.NodeProto) -> bool:
    """A blocked group-1 1x1 NchwcConv with strides and dilations 1, no pads and no input scale."""
    if node.op_type != "NchwcConv" or node.domain != DOMAIN or len(node.input) > _SUM_INPUT + 1:
        return False
    attrs = _attrs(node)
    return (set(attrs) <= _CONV_ATTRS and list(attrs.get("kernel_shape", [])) == [1, 1]
            and list(attrs.get("strides", [1, 1])) == [1, 1] and list(attrs.get("dilations", [1, 1])) == [1, 1]
            and not any(int(p) for p in attrs.get("pads", [0, 0, 0, 0])) and int(attrs.get("group", 1)) == 1)


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
