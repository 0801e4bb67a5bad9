"""MatMul(A, W) -> Reshape(S) becomes Reshape(A) -> MatMul(W) when S keeps the last dim N.

Keras' Dense on a 3-D input exports (tf2onnx, Tensordot) as Reshape(X, [-1, K]) -> MatMul(W)
-> Reshape([B, T, N]) -> bias / Gelu / residual Add. The output Reshape sits between the MatMul
and its epilogue, so fuse_epilogue cannot absorb the bias, activation or sum (BERT's FFN: the
Gelu ran as six elementwise passes plus a slow standalone Erf). MatMul with 2-D constant
weights multiplies every row of its input's leading dims alike, so reshaping the input instead
gives the same values in the same row-major order: A [M, K] -> [S[:-1], K], and the MatMul
writes the Reshape's output directly. When A is itself a Reshape of a tensor that already has
the shape [S[:-1], K] (the Tensordot case), the MatMul reads that tensor and both Reshapes go.

Only MatMuls with constant 2-D weights whose output has no other reader and is not a graph
output are rewritten; Reshapes are views in the runtime, so the new input Reshape costs nothing."""
from typing import Optional

import numpy as np
import onnx
from onnx import helper, numpy_helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph.constants import Constants
from compiler.onnx_graph.graph_edit import (consumers, fresh_name, names_in_use, opset_version,
                                            producers, remove_nodes, remove_value_info)
from compiler.onnx_graph.type_inference import infer_types

_DEFAULT_DOMAINS = ("", "ai.onnx")


@register("hoist_matmul_reshape", kind="fuse")
def hoist_matmul_reshape(model, ctx):
    """Move a last-dim-preserving Reshape from a constant-weight MatMul's output to its input."""
    graph = model.graph
    if not any(n.op_type == "MatMul" and n.domain in _DEFAULT_DOMAINS for n in graph.node):
        return model
    constants = Constants(graph, opset_version(model), ctx.model_name)
    types = infer_types(model, model_name=ctx.model_name).types
    outputs = {o.name for o in graph.output}
    taken = names_in_use(graph)
    readers = None  # built when first needed, rebuilt after each rewrite
    for matmul in [n for n in graph.node if n.op_type == "MatMul" and n.domain in _DEFAULT_DOMAINS]:
        if readers is None:
            readers = consumers(graph)
        reshape = _rewritable(matmul, readers, constants, types, outputs)
        if reshape is None:
            continue
        a, w = matmul.input[0], matmul.input[1]
        k = constants.value(w).shape[0]
        target = list(types[reshape.output[0]].shape[:-1]) + [k]
        source = _reshape_source(a, producers(graph), types, target)
        bypassed = source is not None  # the MatMul skips the Reshape that made `a`
        new_nodes = []
        if source is None:
            shape_name = fresh_name(f"{a}_rows_shape", taken)
            graph.initializer.append(numpy_helper.from_array(np.asarray(target, np.int64), shape_name))
            constants.add(shape_name, np.asarray(target, np.int64))
            source = fresh_name(f"{a}_rows", taken)
            new_nodes.append(helper.make_node("Reshape", [a, shape_name], [source],
                                              name=f"{matmul.name or source}_input_reshape"))
        new_nodes.append(helper.make_node("MatMul", [source, w], [reshape.output[0]], name=matmul.name))
        position = list(graph.node).index(matmul)
        for offset, node in enumerate(new_nodes):
            graph.node.insert(position + offset, node)
        doomed = [matmul, reshape]
        input_reshape = producers(graph).get(a)
        if bypassed and a not in outputs and all(r.output[0] == matmul.output[0] for r in readers.get(a, [])):
            doomed.append(input_reshape)  # its only reader was this MatMul
            remove_value_info(graph, [a])
        remove_value_info(graph, [matmul.output[0]])
        remove_nodes(graph, doomed)
        readers = None
        ctx.logger.debug("hoist_matmul_reshape: MatMul '%s' now writes '%s' %s", matmul.name, reshape.output[0],
                         types[reshape.output[0]].shape)
    return model


def _rewritable(matmul, readers, constants, types, outputs) -> Optional[onnx.NodeProto]:
    """The Reshape reading `matmul`'s output, when the rewrite applies."""
    out = matmul.output[0]
    if matmul.input[1] not in constants or constants.value(matmul.input[1]).ndim != 2 or out in outputs:
        return None
    r = readers.get(out, [])
    if len(r) != 1 or r[0].op_type != "Reshape" or r[0].domain not in _DEFAULT_DOMAINS or r[0].input[0] != out:
        return None
    a_type, out_type, reshaped = types.get(matmul.input[0]), types.get(out), types.get(r[0].output[0])
    if any(t is None or not t.is_static for t in (a_type, out_type, reshaped)):
        return None
    if not reshaped.shape or reshaped.shape[-1] != out_type.shape[-1] or len(a_type.shape) < 1:
        return None
    return r[0]


def _reshape_source(a: str, made_by, types, target) -> Optional[str]:
    """The tensor a Reshape turned into `a`, when it already has the `target` shape."""
    node = made_by.get(a)
    if node is None or node.op_type != "Reshape" or node.domain not in _DEFAULT_DOMAINS:
        return None
    t = types.get(node.input[0])
    return node.input[0] if t is not None and t.is_static and list(t.shape) == list(target) else None

