"""Einsum -> ReduceSum / Transpose / Reshape / MatMul, which the emulator has kernels for.

Two operands `A,B->C`: letters summed in one operand only are reduced first; then A is laid out
as [batch, kept-from-A, contracted] and B as [batch, contracted, kept-from-B], both flattened to
3-D, multiplied by one batched MatMul, and the result reshaped and transposed to C's order
(attention's `bqhd,bkhd->bhqk` and `bhqk,bkhd->bqhd`, `abc,cd->abd`, outer products...). One
operand `A->C`: ReduceSum of the letters not in C, then Transpose. `...` is expanded to letters
of its own (right-aligned, as numpy does). Needs static shapes (run after input shapes are
fixed); a letter repeated within one operand (a diagonal), more than two operands or batch
dimensions that broadcast (1 against n) raise an error naming the node.
"""
from typing import Dict, List, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from compiler.converter.pass_registry import register
from compiler.errors import ConversionError
from compiler.onnx_graph.graph_edit import opset_version
from compiler.onnx_graph.type_inference import infer_types


@register("decompose_einsum", kind="fuse")
def decompose_einsum(model, ctx):
    """Rewrite Einsum (two operands or one) as ReduceSum/Transpose/Reshape/MatMul."""
    graph = model.graph
    if not any(n.op_type == "Einsum" and n.domain in ("", "ai.onnx") for n in graph.node):
        return model
    types = infer_types(model, model_name=ctx.model_name).types
    builder = _Builder(graph, opset_version(model))
    nodes: List[onnx.NodeProto] = []
    for node in graph.node:
        if node.op_type != "Einsum" or node.domain not in ("", "ai.onnx"):
            nodes.append(node)
            continue
        where = f"{ctx.model_name}: node '{node.name}' (Einsum)"
        shapes = []
        for name in node.input:
            t = types.get(name)
            if t is None or not t.is_static:
                raise ConversionError(f"{where}: input '{name}' has no static shape; fix the input shapes first")
            shapes.append(list(t.shape))
        equation = helper.get_attribute_value(next(a for a in node.attribute if a.name == "equation"))
        equation = equation.decode() if isinstance(equation, bytes) else equation
        builder.nodes = []
        builder.prefix = node.name or node.output[0]
        _decompose(builder, equation.replace(" ", ""), list(node.input), shapes, node.output[0], where)
        nodes.extend(builder.nodes)
    del graph.node[:]
    graph.node.extend(nodes)
    return model


class _Builder:
    def __init__(self, graph: onnx.GraphProto, opset: int):
        self.graph, self.opset = graph, opset
        self.nodes: List[onnx.NodeProto] = []
        self.prefix = ""
        self.used = {t.name for t in graph.initializer} | {o for n in graph.node for o in n.output}

    def name(self, what: str) -> str:
        base = f"{self.prefix}/{what}"
        name, k = base, 0
        while name in self.used:
            k += 1
            name = f"{base}_{k}"
        self.used.add(name)
        return name

    def const(self, what: str, values: Sequence[int]) -> str:
        name = self.name(what)
        self.graph.initializer.append(numpy_helper.from_array(np.asarray(values, dtype=np.int64), name))
        return name

    def add(self, op: str, inputs: List[str], what: str, output: str = None, **attrs) -> str:
        output = output or self.name(what)
        self.nodes.append(helper.make_node(op, inputs, [output], name=self.name(f"{what}_node"), **attrs))
        return output

    def transpose(self, x: str, perm: List[int], what: str, output: str = None) -> str:
        if perm == sorted(perm) and output is None:
            return x
        return self.add("Transpose", [x], what, output, perm=perm)

    def reshape(self, x: str, shape: List[int], what: str, output: str = None) -> str:
        return self.add("Reshape", [x, self.const(f"{what}_shape", shape)], what, output)

    def reduce_sum(self, x: str, axes: List[int], what: str) -> str:
        if not axes:
            return x
        if self.opset >= 13:
            return self.add("ReduceSum", [x, self.const(f"{what}_axes", axes)], what, keepdims=0)
        return self.add("ReduceSum", [x], what, axes=axes, keepdims=0)


def _parse(equation: str, shapes: List[List[int]], where: str):
    if "->" not in equation:
        raise ConversionError(f"{where}: equation '{equation}' has no '->'; implicit output is not supported")
    lhs, out = equation.split("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        raise ConversionError(f"{where}: equation '{equation}' has {len(terms)} operands, the node {len(shapes)}")
    ellipsis_rank = max((len(s) - len(t.replace("...", "")) for t, s in zip(terms, shapes) if "..." in t), default=0)
    spare = [chr(c) for c in range(ord("A"), ord("Z") + 1) if chr(c) not in equation][:ellipsis_rank]
    expanded = []
    for term, shape in zip(terms, shapes):
        if "..." in term:
            n = len(shape) - len(term.replace("...", ""))
            term = term.replace("...", "".join(spare[ellipsis_rank - n:]))
        if len(term) != len(shape):
            raise ConversionError(f"{where}: operand '{term}' of '{equation}' does not match its rank {len(shape)}")
        if len(set(term)) != len(term):
            raise ConversionError(f"{where}: operand '{term}' of '{equation}' repeats a letter (a diagonal), which "
                                  f"is not supported")
        expanded.append(term)
    out = out.replace("...", "".join(spare))
    sizes: Dict[str, int] = {}
    for term, shape in zip(expanded, shapes):
        for letter, dim in zip(term, shape):
            if sizes.setdefault(letter, dim) != dim:
                raise ConversionError(f"{where}: letter '{letter}' of '{equation}' has sizes {sizes[letter]} and "
                                      f"{dim}; broadcasting inside Einsum is not supported")
    return expanded, out, sizes


def _decompose(b: _Builder, equation: str, inputs: List[str], shapes, output: str, where: str) -> None:
    terms, out, sizes = _parse(equation, shapes, where)
    if len(terms) == 1:
        term = terms[0]
        summed = [i for i, letter in enumerate(term) if letter not in out]
        x = b.reduce_sum(inputs[0], summed, "sum")
        kept = [letter for letter in term if letter in out]
        b.add("Transpose", [x], "out", output, perm=[kept.index(letter) for letter in out])
        return
    if len(terms) != 2:
        raise ConversionError(f"{where}: Einsum with {len(terms)} operands is not supported (one or two)")
    (ta, tb), (xa, xb) = terms, inputs
    # Letters only one operand has and the output lacks are summed away first.
    a_sum = [i for i, c in enumerate(ta) if c not in tb and c not in out]
    b_sum = [i for i, c in enumerate(tb) if c not in ta and c not in out]
    xa, ta = b.reduce_sum(xa, a_sum, "sum_a"), "".join(c for i, c in enumerate(ta) if i not in a_sum)
    xb, tb = b.reduce_sum(xb, b_sum, "sum_b"), "".join(c for i, c in enumerate(tb) if i not in b_sum)
    batch = [c for c in ta if c in tb and c in out]
    contract = [c for c in ta if c in tb and c not in out]
    a_kept = [c for c in ta if c not in tb]
    b_kept = [c for c in tb if c not in ta]
    size = lambda letters: int(np.prod([sizes[c] for c in letters])) if letters else 1  # noqa: E731
    xa = b.transpose(xa, [ta.index(c) for c in batch + a_kept + contract], "a_t")
    xb = b.transpose(xb, [tb.index(c) for c in batch + contract + b_kept], "b_t")
    xa = b.reshape(xa, [size(batch), size(a_kept), size(contract)], "a_3d")
    xb = b.reshape(xb, [size(batch), size(contract), size(b_kept)], "b_3d")
    product = b.add("MatMul", [xa, xb], "matmul")
    order = batch + a_kept + b_kept
    if order == list(out):
        b.reshape(product, [sizes[c] for c in order], "out", output)
        return
    product = b.reshape(product, [sizes[c] for c in order], "unflat")
    b.add("Transpose", [product], "out", output, perm=[order.index(c) for c in out])
