"""Transpose -> Reshape (size-1 dims only) -> Transpose becomes one Transpose between two views.

tf2onnx's Einsum decomposition of Keras MultiHeadAttention moves the keys and the values with
two Transposes each, a Reshape in between that only adds or drops size-1 axes ([1, 4, 1, 128, 64]
-> [4, 128, 64]): 8 of BERT L4's 24 Transposes, each a full copy of the tensor.
fuse_consecutive_transposes cannot merge them across the Reshape. A Reshape that only adds or
drops size-1 axes keeps the other axes in order, so the three nodes move the non-unit axes of
the input X by one permutation: they become Reshape(X -> its non-unit dims) -> Transpose(that
permutation) -> Reshape(-> the output's shape), the Transpose left out when the permutation is
the identity. Reshapes are views in the runtime, so two copies become one (or none).

The first Transpose and the Reshape must have a single reader and not be graph outputs;
every shape must be static."""
from typing import List, Optional

import numpy as np
from onnx import helper, numpy_helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph.graph_edit import (consumers, fresh_name, names_in_use, producers,
                                            remove_nodes, remove_value_info)
from compiler.onnx_graph.type_inference import infer_types

_DEFAULT_DOMAINS = ("", "ai.onnx")
_UNIT_RESHAPES = ("Reshape", "Squeeze", "Unsqueeze")


@register("merge_transposes_across_unit_reshape", kind="fuse")
def merge_transposes_across_unit_reshape(model, ctx):
    """Merge Transpose -> Reshape(adds/drops size-1 axes) -> Transpose into one Transpose between views."""
    graph = model.graph
    if sum(n.op_type == "Transpose" for n in graph.node) < 2:
        return model
    types = infer_types(model, model_name=ctx.model_name).types
    outputs = {o.name for o in graph.output}
    taken = names_in_use(graph)
    made_by = readers = None
    for last in [n for n in graph.node if n.op_type == "Transpose" and n.domain in _DEFAULT_DOMAINS]:
        if made_by is None:
            made_by, readers = producers(graph), consumers(graph)
        found = _pattern(last, made_by, readers, outputs)
        if found is None:
            continue
        first, middle = found
        shapes = [types.get(name) for name in (first.input[0], first.output[0], middle.output[0], last.output[0])]
        if any(t is None or not t.is_static for t in shapes):
            continue
        s0, s1, s2, s3 = (list(t.shape) for t in shapes)
        perm = _merged_perm(s0, s1, s2, s3, _perm(first, len(s0)), _perm(last, len(s2)))
        if perm is None:
            continue
        x, y = first.input[0], last.output[0]
        squeezed = [d for d in s0 if d != 1]
        nodes = []
        if perm == sorted(perm):
            nodes.append(_reshape(graph, taken, x, s3, y, last.name))
        else:
            flat = fresh_name(f"{x}_nonunit", taken)
            moved = fresh_name(f"{y}_moved", taken)
            nodes.append(_reshape(graph, taken, x, squeezed, flat, f"{last.name}_view_in"))
            nodes.append(helper.make_node("Transpose", [flat], [moved], name=last.name or y, perm=perm))
            nodes.append(_reshape(graph, taken, moved, s3, y, f"{last.name}_view_out"))
        position = list(graph.node).index(last)
        for offset, node in enumerate(nodes):
            graph.node.insert(position + offset, node)
        remove_value_info(graph, [first.output[0], middle.output[0]])
        remove_nodes(graph, [first, middle, last])
        made_by = readers = None
        ctx.logger.debug("merge_transposes_across_unit_reshape: '%s' -> '%s' -> '%s' now %s", first.name,
                         middle.name, last.name, [n.op_type for n in nodes])
    return model


def _pattern(last, made_by, readers, outputs):
    middle = made_by.get(last.input[0])
    if middle is None or middle.op_type not in _UNIT_RESHAPES or middle.domain not in _DEFAULT_DOMAINS:
        return None
    first = made_by.get(middle.input[0])
    if first is None or first.op_type != "Transpose" or first.domain not in _DEFAULT_DOMAINS:
        return None
    for name in (first.output[0], middle.output[0]):
        if name in outputs or len(readers.get(name, [])) != 1:
            return None
    return first, middle


def _perm(node, rank: int) -> List[int]:
    for a in node.attribute:
        if a.name == "perm":
            return list(helper.get_attribute_value(a))
    return list(reversed(range(rank)))


def _merged_perm(s0, s1, s2, s3, p1, p2) -> Optional[List[int]]:
    """The permutation of X's non-unit axes the three nodes apply, or None if the middle node
    changes more than size-1 axes."""
    if [d for d in s1 if d != 1] != [d for d in s2 if d != 1]:
        return None
    nonunit_x = [i for i, d in enumerate(s0) if d != 1]
    # X axis behind each non-unit axis of the first Transpose's output, in order; the middle
    # node keeps that order, so the k-th non-unit axis of its output comes from from_x[k].
    from_x = [p1[j] for j, d in enumerate(s1) if d != 1]
    middle_axis_source = {}
    for k, axis in enumerate(i for i, d in enumerate(s2) if d != 1):
        middle_axis_source[axis] = from_x[k]
    sources = [middle_axis_source[p2[m]] for m, d in enumerate(s3) if d != 1]
    return [nonunit_x.index(a) for a in sources]


def _reshape(graph, taken, src: str, shape, dst: str, name: str):
    shape_name = fresh_name(f"{dst}_shape", taken)
    graph.initializer.append(numpy_helper.from_array(np.asarray(shape, np.int64), shape_name))
    return helper.make_node("Reshape", [src, shape_name], [dst], name=name)

