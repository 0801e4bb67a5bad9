"""A channels-last Transpose next to a reorder of the blocked layout -> the reorder's
channels_last form, which moves 8-channel runs instead of transposing twice:

    ToNchwc(Transpose(x [N, H, W, C], perm [0, 3, 1, 2]))   -> ToNchwc(x, channels_last=1)
    Transpose(FromNchwc(x), perm [0, 2, 3, 1])               -> FromNchwc(x, channels_last=1)

ConvNeXt's blocks (after fuse_layernorm and sink_transposes_below_elementwise) run their
depthwise convolution blocked between a channels-last residual stream and a channels-last
LayerNormalization: each block's two reorders and two Transposes become two channels-last
reorders. The Transpose into a ToNchwc stays when something else reads it; a FromNchwc
folds its Transpose only when that Transpose is its one reader (and the FromNchwc's output
is not a graph output)."""
from onnx import helper

from compiler.converter.pass_registry import register
from compiler.converter.passes.eliminate_nop_transpose import transpose_perm
from compiler.onnx_graph.graph_edit import consumers, producers, remove_nodes, remove_value_info
from compiler.onnx_graph.internal_ops import DOMAIN

_DEFAULT_DOMAINS = ("", "ai.onnx")
_TO_CHANNELS_FIRST = [0, 3, 1, 2]
_TO_CHANNELS_LAST = [0, 2, 3, 1]


@register("fold_transposes_into_nchwc_reorders", kind="fuse")
def fold_transposes_into_nchwc_reorders(model, ctx):
    """ToNchwc(Transpose to NCHW) / Transpose(FromNchwc) to NHWC -> ToNchwc / FromNchwc with channels_last=1."""
    graph = model.graph
    reorders = [n for n in graph.node if n.domain == DOMAIN and n.op_type in ("ToNchwc", "FromNchwc")
                and not _channels_last(n)]
    if not reorders or not any(n.op_type == "Transpose" for n in graph.node):
        return model
    outputs = {o.name for o in graph.output}
    made_by, readers = producers(graph), consumers(graph)
    dropped = []
    for reorder in reorders:
        if reorder.op_type == "ToNchwc":
            transpose = made_by.get(reorder.input[0])
            if not _is_transpose(transpose, _TO_CHANNELS_FIRST):
                continue
            reorder.input[0] = transpose.input[0]
            readers[transpose.output[0]].remove(reorder)
            if not readers[transpose.output[0]] and transpose.output[0] not in outputs:
                dropped.append(transpose)
        else:
            after = readers.get(reorder.output[0], [])
            if reorder.output[0] in outputs or len(after) != 1 or not _is_transpose(after[0], _TO_CHANNELS_LAST):
                continue
            remove_value_info(graph, [reorder.output[0]])
            reorder.output[0] = after[0].output[0]
            dropped.append(after[0])
        reorder.attribute.append(helper.make_attribute("channels_last", 1))
        ctx.logger.debug("fold_transposes_into_nchwc_reorders: %s '%s' reads/writes channels last",
                         reorder.op_type, reorder.name)
    remove_value_info(graph, [t.output[0] for t in dropped if t.output[0] not in outputs])
    remove_nodes(graph, dropped)
    return model


def _channels_last(node) -> bool:
    return any(a.name == "channels_last" and a.i for a in node.attribute)


def _is_transpose(node, perm) -> bool:
    return (node is not None and node.op_type == "Transpose" and node.domain in _DEFAULT_DOMAINS
            and transpose_perm(node) == perm)
