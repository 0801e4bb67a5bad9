"""The NHWC -> NCHW Transpose in front of a plain-input NchwcConv (the RGB stem of a network
exported from TensorFlow) -> the convolution's channels-last form, which reads [N, H, W, C]
itself:

    NchwcConv(Transpose(x [N, H, W, C], perm [0, 3, 1, 2]), W)  -> NchwcConv(x, W', channels_last=1)

with C in nchwc.CHANNELS_LAST_CHANNELS (1 or 3) and W' the plain-input weights [M/G, C, KH, KW, G] re-laid out
as [M/G, KH, KW, C, G] (nchwc.plain_input_to_channels_last), so a window row's KW·C input values
are contiguous for the tiles. The Transpose step and its pass over the input go; the convolution
runs at least as fast on the interleaved channels (docs/benchmarks.md, "The stem on the NHWC
input").

Left as they are: a Transpose that anything else reads (or that is a graph output: it is
computed anyway), other perms, convolutions whose X is not a Transpose (an NCHW model's
input), a blocked X (C % 8 == 0), other channel counts, and weights that are not an
initializer of the graph. Weights shared with another node get a copy; the plain ones go when
nothing reads them any more."""
from onnx import helper

from compiler.converter.pass_registry import register
from compiler.converter.passes.eliminate_nop_transpose import transpose_perm
from compiler.onnx_graph import nchwc
from compiler.onnx_graph.graph_edit import consumers, node_uses, producers, remove_initializers, remove_nodes, \
    remove_value_info
from compiler.onnx_graph.graph_rewrite import GraphRewrite
from compiler.onnx_graph.internal_ops import DOMAIN
from compiler.onnx_graph.type_inference import infer_types

_DEFAULT_DOMAINS = ("", "ai.onnx")
_TO_CHANNELS_FIRST = [0, 3, 1, 2]


@register("fold_input_transpose_into_nchwc_conv", kind="fuse")
def fold_input_transpose_into_nchwc_conv(model, ctx):
    """NchwcConv(Transpose(x [N, H, W, C = 1 or 3], perm [0, 3, 1, 2])) -> NchwcConv(x, channels_last=1)."""
    graph = model.graph
    convs = [n for n in graph.node if n.op_type == "NchwcConv" and n.domain == DOMAIN]
    if not convs or not any(n.op_type == "Transpose" for n in graph.node):
        return model
    made_by, readers = producers(graph), consumers(graph)
    outputs = {o.name for o in graph.output}
    initializers = {t.name for t in graph.initializer}
    types = infer_types(model, model_name=ctx.model_name).types
    rewrite = GraphRewrite(model, ctx.model_name)
    dropped, replaced = [], set()
    for conv in convs:
        transpose = made_by.get(conv.input[0])
        if not _is_transpose(transpose, _TO_CHANNELS_FIRST) or _attr(conv, "channels_last", 0):
            continue
        x, w = types.get(transpose.input[0]), types.get(conv.input[1])
        if (x is None or w is None or not x.is_static or len(x.shape) != 4 or _attr(conv, "group", 1) != 1
                or x.shape[3] not in nchwc.CHANNELS_LAST_CHANNELS or len(w.shape) != 5
                or tuple(w.shape[1:2]) != (x.shape[3],) or conv.input[1] not in initializers):
            continue
        if transpose.output[0] in outputs or readers.get(transpose.output[0], []) != [conv]:
            continue  # the Transpose runs anyway: nothing to gain
        weights = conv.input[1]
        conv.input[0] = transpose.input[0]
        conv.input[1] = rewrite.add_initializer(
            weights + "__channels_last", nchwc.plain_input_to_channels_last(rewrite.constants.value(weights)))
        conv.attribute.append(helper.make_attribute("channels_last", 1))
        replaced.add(weights)
        dropped.append(transpose)
        ctx.logger.debug("fold_input_transpose_into_nchwc_conv: '%s' reads '%s' channels last", conv.name,
                         transpose.input[0])
    if dropped:
        remove_value_info(graph, [t.output[0] for t in dropped])
        remove_nodes(graph, dropped)
        read = set(outputs)
        for node in graph.node:
            read.update(node_uses(node))
        remove_initializers(graph, replaced - read)
    return model


def _attr(node, name: str, default: int) -> int:
    return next((int(helper.get_attribute_value(a)) for a in node.attribute if a.name == name), default)


def _is_transpose(node, perm) -> bool:
    return (node is not None and node.op_type == "Transpose" and node.domain in _DEFAULT_DOMAINS
            and transpose_perm(node) == perm)
