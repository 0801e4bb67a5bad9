from typing import List, Optional

import onnx

from compiler.converter.pass_registry import register
from compiler.onnx_graph.graph_edit import (
    bypass_node, consumers, producers, remove_nodes, remove_value_info, replace_uses,
)
from compiler.onnx_graph.type_inference import infer_types

# Ops that only change a tensor's shape, never the order of its elements.
_RESHAPING = ("Reshape", "Squeeze", "Unsqueeze", "Flatten")


@register("eliminate_nop_reshape", kind="eliminate")
def eliminate_nop_reshape(model, ctx):
    """Remove Reshapes whose output shape equals their (static) input shape, and chains of
    reshaping ops (Reshape, Squeeze, Unsqueeze, Flatten) that end at the shape they started from
    (tf2onnx's Squeeze -> Reshape between a keepdims spatial mean and a 1x1 conv), their
    intermediate tensors read by nothing else."""
    if not any(_reshaping(n) for n in model.graph.node):
        return model
    types = infer_types(model, model_name=ctx.model_name)
    for node in [n for n in model.graph.node if n.op_type == "Reshape" and n.domain in ("", "ai.onnx")]:
        if _same_static_shape(types, node.input[0], node.output[0]):
            bypass_node(model.graph, node)
    while True:
        chain = _nop_chain(model.graph, types)
        if chain is None:
            return model
        replace_uses(model.graph, chain[-1].output[0], chain[0].input[0])
        remove_value_info(model.graph, [n.output[0] for n in chain])
        remove_nodes(model.graph, chain)


def _reshaping(node: onnx.NodeProto) -> bool:
    return node.op_type in _RESHAPING and node.domain in ("", "ai.onnx")


def _same_static_shape(types, a: str, b: str) -> bool:
    ta, tb = types.get(a), types.get(b)
    return ta is not None and tb is not None and ta.is_static and tb.is_static and ta.shape == tb.shape


def _nop_chain(graph: onnx.GraphProto, types) -> Optional[List[onnx.NodeProto]]:
    """The first chain of two or more reshaping ops whose last output has its first input's
    static shape, each intermediate read only by the next op and no graph output."""
    made_by, read_by = producers(graph), consumers(graph)
    outputs = {o.name for o in graph.output}
    for last in graph.node:
        if not _reshaping(last) or last.output[0] in outputs:
            continue
        chain = [last]
        while True:
            first = made_by.get(chain[0].input[0])
            if (first is None or not _reshaping(first) or first.output[0] in outputs
                    or [n is chain[0] for n in read_by.get(first.output[0], [])] != [True]
                    or list(chain[0].input).count(first.output[0]) != 1):
                break
            chain.insert(0, first)
            if _same_static_shape(types, first.input[0], last.output[0]):
                return chain
    return None
