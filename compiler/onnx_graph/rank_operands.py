"""Operands whose length sets an output's rank (Expand's and Reshape's shape, ConstantOfShape's
input), checked before onnx's shape inference: onnx builds an output of that many unknown
dimensions from the operand's static length alone, so a 1-D input of 2^20 floats used as a
shape took 15 s, and a longer one tens of GB, before any other check could run."""
from typing import Dict

import onnx

from compiler.errors import ConversionError
from compiler.onnx_graph.graph_edit import subgraphs

MAX_RANK = 64  # numpy's limit: no array of a higher rank exists to compute or hold
RANK_OPERAND = {"Expand": 1, "Reshape": 1, "ConstantOfShape": 0}
# Ops whose output has the (broadcast) shape of their inputs: a long 1-D tensor stays as long.
_SAME_LENGTH_OPS = frozenset({
    "Identity", "Cast", "CastLike", "Abs", "Neg", "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Floor", "Ceil",
    "Round", "Sign", "Not", "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "And", "Or", "Xor", "Equal",
    "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Where", "Clip",
})


def check_rank_operands(graph: onnx.GraphProto, model_name: str) -> None:
    """Refuse a node whose rank operand is a 1-D tensor longer than MAX_RANK, as far as its length
    is known before inference: declared inputs, initializers, value_info, and the ops above."""
    lengths = _declared_lengths(graph)
    for node in graph.node:
        index = RANK_OPERAND.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        if index is not None and index < len(node.input):
            n = lengths.get(node.input[index], 0)
            if n > MAX_RANK:
                raise ConversionError(
                    f"{model_name}: node '{node.name}' ({node.op_type}): its shape operand '{node.input[index]}' has "
                    f"{n:,} elements, so its output would have rank {n:,}; at most {MAX_RANK} dimensions are supported")
        for body in subgraphs(node):
            check_rank_operands(body, model_name)
        if node.op_type in _SAME_LENGTH_OPS:
            n = max((lengths.get(name, 0) for name in node.input if name), default=0)
            if n:
                for out in node.output:
                    lengths.setdefault(out, n)


def _declared_lengths(graph: onnx.GraphProto) -> Dict[str, int]:
    lengths = {}
    for init in graph.initializer:
        if len(init.dims) == 1:
            lengths[init.name] = int(init.dims[0])
    for vi in list(graph.input) + list(graph.value_info):
        dims = vi.type.tensor_type.shape.dim if vi.type.HasField("tensor_type") else []
        if len(dims) == 1 and dims[0].HasField("dim_value"):
            lengths.setdefault(vi.name, int(dims[0].dim_value))
    return lengths
