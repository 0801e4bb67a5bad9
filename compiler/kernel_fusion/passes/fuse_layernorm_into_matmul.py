"""A LayerNormalization over the last axis whose only reader is a constant-weight MatMul becomes
that MatMul's prologue: FusedMatMul with `normalize_epsilon`, its scale and shift folded into the
weights and the bias.

ConvNeXt normalizes every block's depthwise-convolution output over the channels right before
the block's first Dense (and ViT before its MLP's first Dense): one more pass that reads and
writes the whole [M, K] activation. The packed GEMM reads A a strip of rows at a time; it can
normalize the strip as it reads it, so the normalized tensor never goes to memory. With
LN(x) = (x - mean)·rstd·γ + β over the last axis, LN(x)·W + b = ((x - mean)·rstd)·(diag(γ)·W)
+ (β·W + b), so the kernel only has to normalize (mean 0, variance 1) and the compiler scales
W's rows by γ and adds β·W to the bias (float64, stored in the weights' dtype as new
initializers).

Taken: LayerNormalization (default domain, axis the last, epsilon > 0, only its first output
used) with constant scale (and bias) of one value per normalized element, whose output has one
reader, is not a graph output, and is input 0 of a MatMul with constant 2-D weights or of a
FusedMatMul (fuse_epilogue's, so the bias, sum and activation stay) that has no prologue yet.
Runs after fuse_epilogue."""
from typing import Optional

import numpy as np
import onnx
from onnx import helper, numpy_helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph.constants import Constants
from compiler.onnx_graph.graph_edit import (consumers, fresh_name, names_in_use, opset_version, remove_initializers,
                                            remove_nodes, remove_value_info)
from compiler.onnx_graph.internal_ops import DOMAIN, ensure_domain_imported, fused_node
from compiler.onnx_graph.type_inference import infer_types

_DEFAULT_DOMAINS = ("", "ai.onnx")
EPSILON_ATTR = "normalize_epsilon"


@register("fuse_layernorm_into_matmul", kind="fuse")
def fuse_layernorm_into_matmul(model, ctx):
    """LayerNormalization -> (Fused)MatMul with constant weights: the normalization as the GEMM's prologue."""
    graph = model.graph
    if not any(n.op_type == "LayerNormalization" for n in graph.node):
        return model
    constants = Constants(graph, opset_version(model), ctx.model_name)
    types = infer_types(model, model_name=ctx.model_name).types
    outputs = {o.name for o in graph.output}
    taken = names_in_use(graph)
    changed = False
    for ln in [n for n in graph.node if n.op_type == "LayerNormalization" and n.domain in _DEFAULT_DOMAINS]:
        readers = consumers(graph)
        target = _target(ln, readers, constants, types, outputs)
        if target is None:
            continue
        w = constants.value(target.input[1])
        gamma = _per_row(constants.value(ln.input[1]), w.shape[0])
        beta = (_per_row(constants.value(ln.input[2]), w.shape[0]) if len(ln.input) > 2 and ln.input[2]
                else np.zeros(w.shape[0]))
        has_bias = len(target.input) > 2 and target.input[2] != ""
        bias = constants.value(target.input[2]).astype(np.float64).reshape(-1) if has_bias else np.zeros(w.shape[1])
        new_w = (gamma[:, None] * w.astype(np.float64)).astype(w.dtype)
        new_bias = (bias + beta @ w.astype(np.float64)).astype(w.dtype)
        if not (np.all(np.isfinite(new_w)) and np.all(np.isfinite(new_bias))):
            continue
        names = []
        bias_base = target.input[2] if has_bias else f"{target.name or target.output[0]}_bias"
        for base, value in ((target.input[1], new_w), (bias_base, new_bias)):
            if value is new_bias and not has_bias and not np.any(new_bias):
                names.append("")  # no shift and no bias: none to add
                continue
            name = fresh_name(f"{base}_lnfold", taken)
            graph.initializer.append(numpy_helper.from_array(value, name))
            constants.add(name, value)
            names.append(name)
        replaced = [target.input[1]] + ([target.input[2]] if has_bias else [])
        epsilon = float({a.name: helper.get_attribute_value(a) for a in ln.attribute}.get("epsilon", 1e-5))
        if target.domain == DOMAIN:
            inputs = list(target.input) + [""] * (4 - len(target.input))
            inputs[0], inputs[1], inputs[2] = ln.input[0], names[0], names[1]
            fused = fused_node("FusedMatMul", inputs, target.output[0], target.name, target,
                               *_epilogue_of(target))
        else:
            fused = fused_node("FusedMatMul", [ln.input[0], names[0], names[1]], target.output[0],
                               target.name or target.output[0], target)
        fused.attribute.append(helper.make_attribute(EPSILON_ATTR, epsilon))
        position = list(graph.node).index(target)
        graph.node.insert(position + 1, fused)
        remove_value_info(graph, [ln.output[0]])
        remove_nodes(graph, [ln, target])
        still_read = {i for n in graph.node for i in n.input}
        remove_initializers(graph, [r for r in replaced + list(ln.input[1:]) if r and r not in still_read])
        ctx.logger.debug("fuse_layernorm_into_matmul: LayerNormalization '%s' -> the prologue of '%s'", ln.name,
                         fused.name)
        changed = True
    if changed:
        ensure_domain_imported(model)
    return model


def _target(ln, readers, constants, types, outputs) -> Optional[onnx.NodeProto]:
    """The (Fused)MatMul that can take `ln` as its prologue, or None."""
    y = ln.output[0]
    if any(o and readers.get(o) for o in ln.output[1:]) or y in outputs:
        return None
    attrs = {a.name: helper.get_attribute_value(a) for a in ln.attribute}
    x_type = types.get(ln.input[0])
    if x_type is None or x_type.shape is None or not x_type.shape:
        return None
    axis = int(attrs.get("axis", -1))
    if axis not in (-1, len(x_type.shape) - 1) or not float(attrs.get("epsilon", 1e-5)) > 0.0:
        return None
    if ln.input[1] not in constants or (len(ln.input) > 2 and ln.input[2] and ln.input[2] not in constants):
        return None
    r = readers.get(y, [])
    if len(r) != 1:
        return None
    node = r[0]
    plain = node.op_type == "MatMul" and node.domain in _DEFAULT_DOMAINS
    fused = node.op_type == "FusedMatMul" and node.domain == DOMAIN
    # y only as A: read as the residual sum too (BERT's post-LN), it is needed in memory.
    if not (plain or fused) or node.input[0] != y or list(node.input).count(y) != 1 or node.input[1] not in constants:
        return None
    if fused and any(a.name == EPSILON_ATTR for a in node.attribute):
        return None
    w = constants.value(node.input[1])
    if w.ndim != 2 or w.dtype.kind != "f" or w.shape[0] != x_type.shape[-1]:
        return None
    for name in ln.input[1:]:
        if name and _per_row(constants.value(name), w.shape[0]) is None:
            return None
    if fused and len(node.input) > 2 and node.input[2] and node.input[2] not in constants:
        return None
    return node


def _per_row(value: np.ndarray, k: int) -> Optional[np.ndarray]:
    """A scale or shift of one value per normalized element (or one for all) as float64 [k]."""
    if value.dtype.kind != "f" or any(d != 1 for d in value.shape[:-1]):
        return None
    if value.ndim and value.shape[-1] not in (1, k):
        return None
    return np.broadcast_to(value.astype(np.float64).reshape(-1), (k,)) if value.size in (1, k) else None


def _epilogue_of(node):
    """(activation, activation_params) of a fused node, for fused_node."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    activation = attrs.get("activation", b"")
    activation = activation.decode() if isinstance(activation, bytes) else activation
    return activation, list(attrs.get("activation_params", []))
