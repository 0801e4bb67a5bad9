"""A scalar Mul (or Div) folded into the constant weights of the MatMul it scales.

Attention computes softmax(s · Q·Kᵀ) with s = 1/√d as a separate Mul over the [heads, T, T]
scores (tf2onnx, Keras MultiHeadAttention), one more pass over the largest tensor of the
block. Scaling commutes with every step back to the query projection: views (Reshape,
Squeeze, Unsqueeze, Flatten, Identity, Transpose) move elements without changing them, a
MatMul of two run-time tensors is linear in each, a bias Add of a constant scales with its
constant, and the projection MatMul(X, W) with constant W becomes MatMul(X, s·W). So the pass
walks back from the Mul's other operand through such nodes, each of whose outputs must have
that one reader and not be a graph output, to a MatMul with constant 2-D weights, multiplies
those weights (and the bias constants passed on the way) by s into new initializers (the
originals may be shared), and removes the Mul. Mul(x, c) and Div(x, c) with c a scalar
constant (Div: s = 1/c) are folded; anything else found on the way leaves the graph as it was.
The arithmetic is done in float64 and stored in the weights' dtype."""
from typing import List, Optional, Tuple

import numpy as np
import onnx
from onnx import numpy_helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph.constants import Constants
from compiler.onnx_graph.graph_edit import bypass_node, consumers, fresh_name, names_in_use, opset_version, producers

_DEFAULT_DOMAINS = ("", "ai.onnx")
_VIEWS = ("Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Transpose")
_MAX_DEPTH = 16


@register("fold_scale_into_matmul", kind="fuse")
def fold_scale_into_matmul(model, ctx):
    """Fold a scalar-constant Mul/Div into the constant weights of the MatMul (through views) it scales."""
    graph = model.graph
    if not any(n.op_type in ("Mul", "Div") for n in graph.node) or not any(n.op_type == "MatMul" for n in graph.node):
        return model
    constants = Constants(graph, opset_version(model), ctx.model_name)
    outputs = {o.name for o in graph.output}
    taken = names_in_use(graph)
    made_by = readers = None  # built when first needed, rebuilt after each edit
    for node in [n for n in graph.node if n.op_type in ("Mul", "Div") and n.domain in _DEFAULT_DOMAINS]:
        found = _scale_of(node, constants)
        if found is None:
            continue
        data, scale = found
        if made_by is None:
            made_by, readers = producers(graph), consumers(graph)
        path = _trace(data, made_by, readers, constants, outputs, 0)
        if path is None:
            continue
        made_by = readers = None
        if node.input[0] != data:  # bypass_node passes input 0 through
            node.input[0], node.input[1] = node.input[1], node.input[0]
        # The scale goes before the weights are scaled: were it to stay, it would apply twice.
        if not bypass_node(graph, node):
            ctx.logger.debug("fold_scale_into_matmul: could not bypass '%s'", node.name)
            continue
        for target, index in path:
            value = constants.value(target.input[index])
            scaled = (value.astype(np.float64) * scale).astype(value.dtype)
            name = fresh_name(f"{target.input[index]}_scaled", taken)
            graph.initializer.append(numpy_helper.from_array(scaled, name))
            constants.add(name, scaled)
            target.input[index] = name
        ctx.logger.debug("fold_scale_into_matmul: %s '%s' (x%g) folded into %s", node.op_type, node.name, scale,
                         [t.name for t, _ in path])
    return model


def _scale_of(node, constants) -> Optional[Tuple[str, float]]:
    """(the scaled tensor, the factor) of a Mul/Div by a scalar float constant."""
    if len(node.input) != 2 or node.input[0] == node.input[1]:
        return None
    for data, const in ((node.input[0], node.input[1]), (node.input[1], node.input[0])):
        if node.op_type == "Div" and const != node.input[1]:
            continue
        if const in constants and data not in constants:
            value = constants.value(const)
            if value.size != 1 or value.dtype.kind != "f":
                return None
            s = float(value.reshape(-1)[0])
            if node.op_type == "Div":
                s = 1.0 / s if s != 0.0 else float("nan")
            return (data, s) if np.isfinite(s) and s != 0.0 else None
    return None


def _trace(tensor: str, made_by, readers, constants, outputs, depth) -> Optional[List[Tuple[onnx.NodeProto, int]]]:
    """The (node, input index) constants to scale so that `tensor` comes out scaled, or None."""
    if depth > _MAX_DEPTH or tensor in outputs or len(readers.get(tensor, [])) != 1:
        return None
    node = made_by.get(tensor)
    if node is None or node.domain not in _DEFAULT_DOMAINS:
        return None
    if node.op_type in _VIEWS:
        return _trace(node.input[0], made_by, readers, constants, outputs, depth + 1)
    if node.op_type == "MatMul":
        w = node.input[1]
        if w in constants and constants.value(w).ndim == 2 and constants.value(w).dtype.kind == "f":
            return [(node, 1)]
        if node.input[0] in constants or w in constants:
            return None
        for side in (0, 1):
            path = _trace(node.input[side], made_by, readers, constants, outputs, depth + 1)
            if path is not None:
                return path
        return None
    if node.op_type == "Add" and len(node.input) == 2:
        for i in (0, 1):
            other = node.input[1 - i]
            if node.input[i] in constants and other not in constants:
                if constants.value(node.input[i]).dtype.kind != "f":
                    return None
                path = _trace(other, made_by, readers, constants, outputs, depth + 1)
                return None if path is None else path + [(node, i)]
    return None

