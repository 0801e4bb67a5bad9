"""Two or more strided 1x1 NchwcConvs reading the same X ==> one subsample step, X[:, :, ::sh,
::sw], that they read as stride-1 convolutions.

ResNet's first block of a stage has two such convolutions on the previous stage's output (the
block's first 1x1 and its shortcut, both stride 2). Alone, each one reads every second pixel
of every second row of X itself: on narrow rows from its own copy of those pixels (the
kernel's subsample copy, made anew by each reader), on wider rows as strided rows of a few
tiles each. Here the copy is made once, by an NchwcMaxPool with a 1x1 window and the
convolutions' strides (the maximum over one pixel is that pixel, float16 included; the pool
copies the pixels of such a window), and both convolutions run on it as one long row of
pixels, the 1x1 stride-1 kernel's fastest form. Measured on ResNet50, 2 threads: the six
strided convolutions and the three subsamples take 0.93x (fp32) and 0.94x (fp16) the time of
the six strided ones at batch 8, the same at batch 1 (X is in cache there; docs/benchmarks.md,
"One subsample for a block's two strided 1x1 layers").

Rewritten (the blocked nodes written by to_nchwc_layout, which runs before): NchwcConvs on a
blocked X [N, C/8, H, W, 8] with a static shape, group 1, a 1x1 window, dilations 1, no pads,
no input scale, the same strides (not all 1), at least MIN_READERS of them on that X. The
subsample is a new tensor `<X>__subsample<sh>x<sw>`; each such reader takes it as X with strides
1. A single strided reader is left to its kernel (with a step of its own: not measured).
"""
from collections import defaultdict
from typing import Optional, Tuple

import onnx
from onnx import helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph import nchwc
from compiler.onnx_graph.graph_edit import fresh_name, names_in_use
from compiler.onnx_graph.internal_ops import DOMAIN
from compiler.onnx_graph.type_inference import infer_types

MIN_READERS = 2
_SCALE_INPUT = 4  # NchwcConv's input scale S (fold_channel_scale_into_nchwc_conv)


@register("share_strided_subsample", kind="fuse")
def share_strided_subsample(model, ctx):
    """Strided 1x1 NchwcConvs sharing an X read one subsample of it, as stride-1 convolutions."""
    graph = model.graph
    if not any(n.op_type == "NchwcConv" and n.domain == DOMAIN for n in graph.node):
        return model
    types = infer_types(model, model_name=ctx.model_name).types
    readers = defaultdict(list)  # (X, strides) -> its strided 1x1 NchwcConvs
    for node in graph.node:
        strides = _strided_pointwise(node, types)
        if strides is not None:
            readers[(node.input[0], strides)].append(node)
    taken = names_in_use(graph)
    steps = {}  # id(first reader) -> the subsample step it and the others read
    for (x, (sh, sw)), convs in readers.items():
        if len(convs) < MIN_READERS:
            continue
        sub = fresh_name(f"{x}__subsample{sh}x{sw}", taken)
        steps[id(convs[0])] = helper.make_node(
            "NchwcMaxPool", [x], [sub], fresh_name(f"{convs[0].name}__subsample", taken), domain=DOMAIN,
            kernel_shape=[1, 1], strides=[sh, sw], dilations=[1, 1], pads=[0, 0, 0, 0])
        for conv in convs:
            conv.input[0] = sub
            for a in conv.attribute:
                if a.name == "strides":
                    a.CopyFrom(helper.make_attribute("strides", [1, 1]))
        ctx.logger.debug("share_strided_subsample: %s read %s subsampled %dx%d", [c.name for c in convs], x, sh, sw)
    if steps:
        # Each step right before its first reader (graph order is a topological order).
        ordered = []
        for node in graph.node:
            if id(node) in steps:
                ordered.append(steps[id(node)])
            ordered.append(onnx.NodeProto())
            ordered[-1].CopyFrom(node)
        del graph.node[:]
        graph.node.extend(ordered)
    return model


def _strided_pointwise(node: onnx.NodeProto, types) -> Optional[Tuple[int, int]]:
    """The strides of an NchwcConv that is a strided 1x1 group-1 unpadded convolution on a
    static blocked X without an input scale, else None."""
    if node.op_type != "NchwcConv" or node.domain != DOMAIN or len(node.input) > _SCALE_INPUT:
        return None
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    x = types.get(node.input[0])
    if (x is None or not x.is_static or len(x.shape) != 5 or x.shape[4] != nchwc.BLOCK
            or int(attrs.get("group", 1)) != 1 or int(attrs.get("channels_last", 0))
            or list(attrs.get("kernel_shape", [])) != [1, 1] or list(attrs.get("dilations", [1, 1])) != [1, 1]
            or any(int(p) for p in attrs.get("pads", [0, 0, 0, 0]))):
        return None
    strides = tuple(int(s) for s in attrs.get("strides", [1, 1]))
    return strides if len(strides) == 2 and strides != (1, 1) else None
