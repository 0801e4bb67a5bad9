"""A per-column constant Mul after a constant-weight MatMul (and its bias Adds) folded into the
weights: (X·W + b)·γ = X·(W·diag γ) + b·γ.

ConvNeXt's blocks end with Dense -> LayerScale (x·γ, γ one value per channel) -> residual Add.
The Mul sits between the MatMul and the residual Add, so fuse_epilogue stops before it and the
scale and the Add run as one more pass over the block's output (a FusedElementwise reading the
GEMM's output and the residual, writing the sum). Scaling W's columns and the bias by γ gives
the same values up to one rounding of the products, and leaves MatMul -> bias Add -> residual
Add, which fuse_epilogue makes one FusedMatMul with the residual as its epilogue's sum.

Walks forward from each MatMul with constant 2-D float weights W [K, N] over single-reader
tensors that are not graph outputs: any number of Adds of a constant that is one value per
column (shape [..., 1 or N] with every other dim 1 and no more dims than the MatMul's output),
then a Mul by such a constant γ. W·γ and b·γ are computed in float64 and stored in the weights'
dtype as new initializers (the originals may be shared). Where W·γ would leave the dtype's
normal range (a float16 model's weights times ConvNeXt's untrained γ = 1e-6 would flush to
zero), W·γ·2^k is stored instead, with 2^k bringing the largest |γ| into [1, 2), and a Mul by
the scalar 2^-k (exact in float16 down to 2^-24) is left right after the MatMul, which
fuse_epilogue takes as FusedMatMul's `alpha`, applied in float32: X·(W·γ·2^k)·2^-k + b·γ. The
fold is skipped when even that leaves a product of a normal weight, or b·γ, out of range."""
from typing import List, Optional, Tuple

import numpy as np
import onnx
from onnx import numpy_helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph.constants import Constants
from compiler.onnx_graph.graph_edit import (bypass_node, consumers, fresh_name, names_in_use, opset_version,
                                            remove_initializers)
from compiler.onnx_graph.type_inference import infer_types

_DEFAULT_DOMAINS = ("", "ai.onnx")
_MAX_ADDS = 4


@register("fold_column_scale_into_matmul", kind="fuse")
def fold_column_scale_into_matmul(model, ctx):
    """Fold a per-column constant Mul after a constant-weight MatMul (+ bias Adds) into W and the bias."""
    graph = model.graph
    if not any(n.op_type == "Mul" for n in graph.node) or not any(n.op_type == "MatMul" for n in graph.node):
        return model
    constants = Constants(graph, opset_version(model), ctx.model_name)
    types = infer_types(model, model_name=ctx.model_name).types
    outputs = {o.name for o in graph.output}
    taken = names_in_use(graph)
    for matmul in [n for n in graph.node if n.op_type == "MatMul" and n.domain in _DEFAULT_DOMAINS]:
        w_name = matmul.input[1]
        if w_name not in constants or matmul.input[0] in constants:
            continue
        w = constants.value(w_name)
        out_type = types.get(matmul.output[0])
        if w.ndim != 2 or w.dtype.kind != "f" or out_type is None or out_type.shape is None:
            continue
        found = _chain(matmul, consumers(graph), constants, outputs, len(out_type.shape), w.shape[1], w.dtype)
        if found is None:
            continue
        adds, mul, mul_data, gamma = found
        power = 0
        w_scaled = _scaled(w, gamma)
        if w_scaled is None:
            power = _power_of_two(w, gamma)
            if power is not None:
                w_scaled = _scaled(w, gamma * 2.0 ** power, normal_only=True)
        scaled = [(matmul, 1, w_scaled)]
        for add, index in adds:
            b = constants.value(add.input[index])
            scaled.append((add, index, _scaled(np.broadcast_to(b, b.shape[:-1] + (w.shape[1],)), gamma)))
        if any(s is None for _, _, s in scaled):
            ctx.logger.debug("fold_column_scale_into_matmul: '%s' left alone (the scaled constants leave %s's "
                             "normal range)", mul.name, w.dtype)
            continue
        if mul.input[0] != mul_data:  # bypass_node passes input 0 through
            mul.input[0], mul.input[1] = mul.input[1], mul.input[0]
        # The Mul goes before the constants are scaled: were it to stay, γ would apply twice.
        if not bypass_node(graph, mul):
            ctx.logger.debug("fold_column_scale_into_matmul: could not bypass '%s'", mul.name)
            continue
        if power:
            # X·W' then ·2^-k: the MatMul's output is renamed, the Mul writes the old name.
            product = fresh_name(f"{matmul.output[0]}_unscaled", taken)
            factor = fresh_name(f"{matmul.output[0]}_alpha", taken)
            value = np.array(2.0 ** -power, dtype=w.dtype)
            graph.initializer.append(numpy_helper.from_array(value, factor))
            constants.add(factor, value)
            unscale = onnx.helper.make_node("Mul", [product, factor], [matmul.output[0]],
                                            name=fresh_name(f"{matmul.name or product}_alpha", taken))
            matmul.output[0] = product
            graph.node.insert(list(graph.node).index(matmul) + 1, unscale)
        replaced = set()
        for node, index, value in scaled:
            name = fresh_name(f"{node.input[index]}_colscaled", taken)
            graph.initializer.append(numpy_helper.from_array(value, name))
            constants.add(name, value)
            replaced.add(node.input[index])
            node.input[index] = name
        still_read = {i for n in graph.node for i in n.input}
        remove_initializers(graph, [r for r in replaced if r not in still_read and r not in outputs])
        ctx.logger.debug("fold_column_scale_into_matmul: Mul '%s' folded into MatMul '%s' and %d bias Adds",
                         mul.name, matmul.name, len(adds))
    return model


def _chain(matmul, readers, constants, outputs, rank: int, n: int, dtype
           ) -> Optional[Tuple[List[Tuple[onnx.NodeProto, int]], onnx.NodeProto, str, np.ndarray]]:
    """(the bias Adds as (node, constant input index), the Mul, the Mul's data input, γ [N]) or None."""
    adds = []
    cur = matmul.output[0]
    for _ in range(_MAX_ADDS + 1):
        r = readers.get(cur, [])
        if cur in outputs or len(r) != 1 or r[0].domain not in _DEFAULT_DOMAINS or len(r[0].input) != 2:
            return None
        node = r[0]
        if node.input[0] == node.input[1] or node.op_type not in ("Add", "Mul"):
            return None
        index = 1 if node.input[0] == cur else 0
        value = _column_constant(node.input[index], constants, rank, n, dtype)
        if value is None:
            return None
        if node.op_type == "Mul":
            return adds, node, cur, np.broadcast_to(value.reshape(-1).astype(np.float64), (n,))
        if len(adds) == _MAX_ADDS:
            return None
        adds.append((node, index))
        cur = node.output[0]
    return None


def _column_constant(name: str, constants, rank: int, n: int, dtype) -> Optional[np.ndarray]:
    """The constant `name` if it is one value per column of a [..., N] tensor of `rank` dims."""
    if name not in constants:
        return None
    value = constants.value(name)
    if value.dtype != dtype or value.ndim > rank:
        return None
    shape = (1,) * (rank - value.ndim) + value.shape
    if any(d != 1 for d in shape[:-1]) or shape[-1] not in (1, n):
        return None
    return value


_MAX_POWER = 24  # 2^-24, float16's smallest subnormal: the Mul's factor stays exact


def _power_of_two(w: np.ndarray, gamma: np.ndarray) -> Optional[int]:
    """k with max |γ|·2^k in [1, 2) (a uniform γ then keeps every normal weight normal), for a
    float16 W whose W·γ leaves the normal range; None where that would not help (float32, γ all
    zero or already at least 1/2)."""
    top = float(np.abs(gamma).max())
    if w.dtype != np.float16 or top == 0.0:
        return None
    k = int(np.ceil(-np.log2(top)))
    return k if 0 < k <= _MAX_POWER else None


def _scaled(value: np.ndarray, gamma: np.ndarray, normal_only: bool = False) -> Optional[np.ndarray]:
    """value·γ (γ along the last axis) in value's dtype, or None if a nonzero product is not a
    finite normal number of that dtype (normal_only: of those whose value is normal; a
    subnormal weight's product may stay subnormal)."""
    exact = value.astype(np.float64) * gamma
    info = np.finfo(value.dtype)
    keep = exact != 0
    if normal_only:
        keep &= np.abs(value.astype(np.float64)) >= info.tiny
    magnitude = np.abs(exact[keep])
    if magnitude.size and (magnitude.min() < info.tiny or magnitude.max() > info.max):
        return None
    return exact.astype(value.dtype)
