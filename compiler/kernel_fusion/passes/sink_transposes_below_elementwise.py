"""A binary elementwise op of transposed operands -> the op on the untransposed tensors, then one
Transpose: Add(Transpose(a, p), Transpose(b, p)) = Transpose(Add(a, b), p).

ConvNeXt's residual stream shows why: tf2onnx keeps it in NCHW for the depthwise convolution, so
every block ends with Add(residual, Transpose(channels-last MLP output -> NCHW)), and the
residual itself is a Transpose of the previous block's sum (or of the stem's channel
LayerNormalization, fuse_layernorm). Sinking the Transpose below each Add, in graph order,
carries the whole stream channels last; what is left of the Transposes are single readers (a
ToNchwc, a channels-last Transpose) that fold_transposes_into_nchwc_reorders and
fuse_consecutive_transposes remove.

An operand written by a convolution (a stage's first residual: the downsampling convolution)
gets the inverse Transpose instead: the convolution runs blocked and its FromNchwc then writes
channels last (fold_transposes_into_nchwc_reorders), so that Transpose costs nothing either.

Applied when the operands have the same static shape (no broadcasting to re-lay out) and one
of the Transposes is read by this op alone (otherwise the rewrite would add a Transpose rather
than move one); a Transpose left without readers is removed."""
from onnx import helper

from compiler.converter.pass_registry import register
from compiler.converter.passes.eliminate_nop_transpose import transpose_perm
from compiler.onnx_graph.graph_edit import (consumers, fresh_name, names_in_use, producers, remove_nodes,
                                            remove_value_info)
from compiler.onnx_graph.internal_ops import DOMAIN
from compiler.onnx_graph.tensor_types import TensorType
from compiler.onnx_graph.type_inference import infer_types

_DEFAULT_DOMAINS = ("", "ai.onnx")
_BINARY_OPS = ("Add", "Sub", "Mul", "Div")
_CONVOLUTIONS = (("", "Conv"), ("ai.onnx", "Conv"), (DOMAIN, "FusedConv"))


@register("sink_transposes_below_elementwise", kind="fuse")
def sink_transposes_below_elementwise(model, ctx):
    """Op(Transpose(a, p), Transpose(b, p)) -> Transpose(Op(a, b), p) for Add/Sub/Mul/Div of equal shapes."""
    graph = model.graph
    if not any(n.op_type == "Transpose" for n in graph.node):
        return model
    types = infer_types(model, model_name=ctx.model_name).types
    outputs = {o.name for o in graph.output}
    taken = names_in_use(graph)
    # Graph order: the Transpose sunk below one residual Add is an operand of the next one.
    for node in [n for n in graph.node if n.op_type in _BINARY_OPS and n.domain in _DEFAULT_DOMAINS]:
        made_by, readers = producers(graph), consumers(graph)
        out_type = types.get(node.output[0])
        operand_types = [types.get(name) for name in node.input]
        if (len(node.input) != 2 or out_type is None or not out_type.is_static
                or any(t is None or t.shape != out_type.shape for t in operand_types)):
            continue
        operands = [made_by.get(name) for name in node.input]
        rank = len(out_type.shape)
        sole = [_is_transpose(t) and t.output[0] not in outputs and len(readers.get(t.output[0], [])) == 1
                for t in operands]
        if operands[0] is operands[1] or not any(sole):
            continue
        perm = transpose_perm(operands[sole.index(True)], rank)
        kinds = [_operand_kind(t, perm, rank) for t in operands]
        if None in kinds:
            continue
        inverse = [perm.index(i) for i in range(rank)]
        untransposed_type = TensorType(out_type.elem_type, tuple(out_type.shape[i] for i in inverse))
        inputs = []
        for name, operand, kind in zip(node.input, operands, kinds):
            if kind == "transposed":
                inputs.append(operand.input[0])
                continue
            back = fresh_name(f"{name}_untransposed", taken)
            types[back] = untransposed_type
            graph.node.insert(list(graph.node).index(node),
                              helper.make_node("Transpose", [name], [back], name=f"{node.name}_{back}", perm=inverse))
            inputs.append(back)
        out = node.output[0]
        untransposed = fresh_name(f"{out}_untransposed", taken)
        types[untransposed] = untransposed_type  # the next op down the stream checks it
        node.input[:] = inputs
        node.output[0] = untransposed
        graph.node.insert(list(graph.node).index(node) + 1,
                          helper.make_node("Transpose", [untransposed], [out], name=f"{node.name}_transpose",
                                           perm=perm))
        dropped = [t for t, alone in zip(operands, sole) if alone]
        remove_value_info(graph, [t.output[0] for t in dropped])
        remove_nodes(graph, dropped)
        ctx.logger.debug("sink_transposes_below_elementwise: %s '%s' now reads the untransposed operands",
                         node.op_type, node.name)
    return model


def _operand_kind(node, perm, rank):
    """"transposed" (a Transpose by perm), "convolution" (written by a Conv), else None."""
    if _is_transpose(node) and transpose_perm(node, rank) == perm:
        return "transposed"
    if node is not None and (node.domain, node.op_type) in _CONVOLUTIONS:
        return "convolution"
    return None


def _is_transpose(node) -> bool:
    return node is not None and node.op_type == "Transpose" and node.domain in _DEFAULT_DOMAINS
