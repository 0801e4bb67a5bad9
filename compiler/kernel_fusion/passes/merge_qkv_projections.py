"""Self-attention's three Q/K/V projections -> one FusedMatMul over the weights side by side.

A FusedAttention (fuse_attention) whose Q, K and V come, through views only (Reshape, Squeeze,
Unsqueeze, Flatten, Identity), from three MatMul / FusedMatMul nodes that read the same A with
constant 2-D weights of the same K and dtype and the same epilogue (all with a constant [N] bias
or none; no residual sum, no activation), every tensor in between read only there, runs those
three small GEMMs as one: A·[Wq | Wk | Wv] + [bq | bk | bv] (one thread hand-off and one pass
over A instead of three; at BERT's and ViT's sizes a GEMM this narrow is dominated by its
fixed costs, docs/benchmarks.md "Packed GEMM"). The FusedAttention then reads that one
[B, S, Nq + Nk + Nv] tensor (a Reshape view of the product when A is not [B, S, K]) with the
attribute qkv_widths = [Nq, Nk, Nv]: the column ranges that are Q, K and V.

Each view chain must keep the product's last dim (each token's row stays one row of the
attention operand), so the column ranges are exactly the three products. Anything that does not
match exactly (cross-attention, an activation or sum, a weight read elsewhere...) is left as it
is. The weights keep their dtype (an fp16 model's initializers are fp16)."""
from typing import List, Optional, Tuple

import numpy as np
import onnx
from onnx import helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph.graph_edit import consumers, fresh_name, producers, remove_initializers, remove_nodes, \
    remove_value_info
from compiler.onnx_graph.graph_rewrite import GraphRewrite
from compiler.onnx_graph.internal_ops import DOMAIN
from compiler.onnx_graph.type_inference import infer_types

_DEFAULT_DOMAINS = ("", "ai.onnx")
_VIEWS = ("Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity")


@register("merge_qkv_projections", kind="fuse")
def merge_qkv_projections(model, ctx):
    """Merge self-attention's Q/K/V projection GEMMs (same input) into one FusedMatMul read by FusedAttention."""
    if not any(n.op_type == "FusedAttention" and n.domain == DOMAIN for n in model.graph.node):
        return model
    merger = _Merger(model, ctx.model_name)
    for node in [n for n in model.graph.node if n.op_type == "FusedAttention" and n.domain == DOMAIN]:
        merger.try_attention(node)
    return model


class _Merger(GraphRewrite):
    def __init__(self, model: onnx.ModelProto, model_name: str):
        super().__init__(model, model_name)
        self.types = infer_types(model, model_name=model_name).types

    def _shape(self, name: str) -> Optional[Tuple[int, ...]]:
        t = self.types.get(name)
        return tuple(t.shape) if t is not None and t.is_static else None

    def _projection(self, operand: str, made, readers) -> Optional[Tuple[onnx.NodeProto, List[onnx.NodeProto]]]:
        """(the projection, the view nodes from it to `operand`) when `operand` is a view chain of
        a bias-only MatMul/FusedMatMul with constant 2-D weights, each tensor read once."""
        chain, name = [], operand
        while True:
            if name in self.outputs or len(readers.get(name, [])) != 1:
                return None
            node = made.get(name)
            if node is None:
                return None
            if node.domain in _DEFAULT_DOMAINS and node.op_type in _VIEWS:
                chain.insert(0, node)
                name = node.input[0]
                continue
            break
        if node.domain in _DEFAULT_DOMAINS and node.op_type == "MatMul":
            pass
        elif node.domain == DOMAIN and node.op_type == "FusedMatMul":
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            activation = attrs.pop("activation", b"")
            params = attrs.pop("activation_params", [])
            if activation not in (b"", "") or list(params) or attrs:
                return None
            if len(node.input) > 3 and node.input[3]:  # a residual sum
                return None
        else:
            return None
        if len(node.input) < 2 or node.input[1] not in self.constants or self.constants.value(node.input[1]).ndim != 2:
            return None
        n = self.constants.value(node.input[1]).shape[1]
        if len(node.input) > 2 and node.input[2]:
            if node.input[2] not in self.constants or self.constants.value(node.input[2]).shape != (n,):
                return None
        out, seen = self._shape(node.output[0]), self._shape(operand)
        if out is None or seen is None or out[-1] != n or seen[-1] != n:
            return None  # the views must keep each token's row
        return node, chain

    def try_attention(self, attention: onnx.NodeProto) -> bool:
        attrs = {a.name: helper.get_attribute_value(a) for a in attention.attribute}
        if "qkv_widths" in attrs or len(attention.input) != 3:
            return False
        made, readers = producers(self.graph), consumers(self.graph)
        found = [self._projection(name, made, readers) for name in attention.input]
        if None in found:
            return False
        nodes = [p for p, _ in found]
        if len({id(p) for p in nodes}) != 3 or len({p.input[0] for p in nodes}) != 1:
            return False
        weights = [self.constants.value(p.input[1]) for p in nodes]
        has_bias = [len(p.input) > 2 and bool(p.input[2]) for p in nodes]
        if len({w.shape[0] for w in weights}) != 1 or len({w.dtype for w in weights}) != 1 or len(set(has_bias)) != 1:
            return False
        biases = [self.constants.value(p.input[2]) for p in nodes] if has_bias[0] else []
        if biases and {b.dtype for b in biases} != {weights[0].dtype}:
            return False
        shapes = [self._shape(name) for name in attention.input]
        a_shape = self._shape(nodes[0].input[0])
        if a_shape is None or any(len(s) != 3 for s in shapes) or len({s[:2] for s in shapes}) != 1:
            return False  # self-attention: the same B and S for all three
        widths = [int(w.shape[1]) for w in weights]
        batch, seq = shapes[0][:2]
        base = attention.name or attention.output[0]
        w_name = self.add_initializer(f"{base}_qkv_weights", np.concatenate(weights, axis=1))
        inputs = [nodes[0].input[0], w_name]
        if biases:
            inputs.append(self.add_initializer(f"{base}_qkv_bias", np.concatenate(biases)))
        product = fresh_name(f"{base}_qkv", self.taken)
        self.taken.add(product)
        new_nodes = [helper.make_node("FusedMatMul", inputs, [product], name=product, domain=DOMAIN)]
        qkv = product
        if tuple(a_shape[:-1]) != (batch, seq):
            qkv = fresh_name(f"{base}_qkv_view", self.taken)
            self.taken.add(qkv)
            shape = self.add_initializer(f"{qkv}_shape", np.array([batch, seq, sum(widths)], np.int64))
            new_nodes.append(helper.make_node("Reshape", [product, shape], [qkv], name=qkv))
        doomed = nodes + [n for _, chain in found for n in chain]
        old_tensors = [n.output[0] for n in doomed]
        position = list(self.graph.node).index(attention)
        for i, node in enumerate(new_nodes):
            self.graph.node.insert(position + i, node)
        del attention.input[:]
        attention.input.append(qkv)
        attention.attribute.append(helper.make_attribute("qkv_widths", widths))
        remove_nodes(self.graph, doomed)
        remove_value_info(self.graph, old_tensors)
        # The three weights and biases, unless something else still reads them.
        still_read = {i for n in self.graph.node for i in n.input} | self.outputs
        old_consts = {p.input[i] for p in nodes for i in (1, 2) if i < len(p.input) and p.input[i]}
        initializers = {t.name for t in self.graph.initializer}
        remove_initializers(self.graph, [c for c in old_consts if c in initializers and c not in still_read])
        return True
