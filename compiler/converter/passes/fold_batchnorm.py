"""Inference BatchNormalization folded into the op that produces its input.

BN(y) = s·y + t per channel, s = scale / sqrt(var + eps), t = B − mean·s. When y comes from an
op whose weights are constants and which has no other reader, the scaling goes into those
weights and t into its bias, and the BN disappears:

  Conv / ConvTranspose   W scaled per output channel, bias b' = b·s + t
  Gemm (constant B)      op(B) columns scaled, C' = beta·C·s + t, beta = 1
  MatMul (constant 2-D B, 2-D A: BN's channel axis 1 is then the last one)
                         B columns scaled, then Add(t) (fused later into FusedMatMul)

The arithmetic is done in float64 and stored in the weights' dtype; the pass runs before
float_to_half, so an fp16 model gets the folded weights rounded once. A BN with nothing to
fold into stays a BatchNormalization kernel: one pass over the data, where Mul + Add would
be two (measured in docs/benchmarks.md, "Convolution and fusions").
New weights get new names (the originals may be shared); eliminate_unused_initializers drops
the old ones."""
from typing import Dict, Optional

import numpy as np
import onnx
from onnx import helper, numpy_helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph.constants import Constants
from compiler.onnx_graph.graph_edit import (consumers, opset_version, producers, remove_nodes, remove_value_info,
                                            set_float_attribute)
from compiler.onnx_graph.tensor_types import infer_types

_DEFAULT_DOMAINS = ("", "ai.onnx")


@register("fold_batchnorm", kind="fuse")
def fold_batchnorm(model, ctx):
    """Fold inference BatchNormalization into a preceding Conv/ConvTranspose/Gemm/MatMul's weights."""
    graph = model.graph
    if not any(n.op_type == "BatchNormalization" and n.domain in _DEFAULT_DOMAINS for n in graph.node):
        return model
    _Folder(model, ctx).run()
    return model


class _Folder:
    def __init__(self, model: onnx.ModelProto, ctx):
        self.model, self.graph, self.ctx = model, model.graph, ctx
        self.constants = Constants(self.graph, opset_version(model), ctx.model_name)
        self.outputs = {o.name for o in self.graph.output}
        self.ranks: Optional[Dict[str, int]] = None  # computed on first need (MatMul)
        self.taken = {t.name for t in self.graph.initializer} | {o for n in self.graph.node for o in n.output}

    def run(self) -> None:
        for bn in [n for n in self.graph.node if n.op_type == "BatchNormalization" and n.domain in _DEFAULT_DOMAINS]:
            readers = consumers(self.graph)
            owner = producers(self.graph).get(bn.input[0])
            if owner is None or owner.domain not in _DEFAULT_DOMAINS or not self._foldable_bn(bn, readers):
                continue
            if len(readers.get(bn.input[0], [])) != 1 or bn.input[0] in self.outputs:
                continue
            fold = {"Conv": self._into_conv, "ConvTranspose": self._into_conv_transpose, "Gemm": self._into_gemm,
                    "MatMul": self._into_matmul}.get(owner.op_type)
            if fold is None:
                continue
            s, t = self._scale_shift(bn)
            if fold(owner, bn, s, t):
                self.ctx.logger.debug("fold_batchnorm: %s folded into %s '%s'", bn.name, owner.op_type, owner.name)

    # --- the BN ---------------------------------------------------------------------------
    def _foldable_bn(self, bn, readers) -> bool:
        attrs = {a.name: helper.get_attribute_value(a) for a in bn.attribute}
        if attrs.get("training_mode", 0):
            return False
        if any(out and (readers.get(out) or out in self.outputs) for out in bn.output[1:]):
            return False  # running statistics are read: not the inference form
        return len(bn.input) == 5 and all(name in self.constants for name in bn.input[1:])

    def _scale_shift(self, bn):
        eps = 1e-5
        for a in bn.attribute:
            if a.name == "epsilon":
                eps = a.f
        scale, bias, mean, var = (self.constants.value(n).astype(np.float64).reshape(-1) for n in bn.input[1:])
        s = scale / np.sqrt(var + eps)
        return s, bias - mean * s

    # --- the producers ----------------------------------------------------------------------
    def _into_conv(self, conv, bn, s, t) -> bool:
        if conv.input[1] not in self.constants or (len(conv.input) > 2 and conv.input[2] and
                                                   conv.input[2] not in self.constants):
            return False
        w = self.constants.value(conv.input[1])
        if w.ndim < 3 or w.shape[0] != s.size:
            return False
        b = self.constants.value(conv.input[2]).astype(np.float64) if len(conv.input) > 2 and conv.input[2] else 0.0
        w2 = w.astype(np.float64) * s.reshape((-1,) + (1,) * (w.ndim - 1))
        self._rewrite(conv, bn, {1: w2.astype(w.dtype), 2: (b * s + t).astype(w.dtype)})
        return True

    def _into_conv_transpose(self, conv, bn, s, t) -> bool:
        if conv.input[1] not in self.constants or (len(conv.input) > 2 and conv.input[2] and
                                                   conv.input[2] not in self.constants):
            return False
        w = self.constants.value(conv.input[1])  # [C, M/group, k...]
        group = next((a.i for a in conv.attribute if a.name == "group"), 1)
        if w.ndim < 3 or w.shape[1] * group != s.size or w.shape[0] % group:
            return False
        b = self.constants.value(conv.input[2]).astype(np.float64) if len(conv.input) > 2 and conv.input[2] else 0.0
        grouped = w.astype(np.float64).reshape((group, w.shape[0] // group, w.shape[1]) + w.shape[2:])
        grouped = grouped * s.reshape((group, 1, w.shape[1]) + (1,) * (w.ndim - 2))
        self._rewrite(conv, bn, {1: grouped.reshape(w.shape).astype(w.dtype), 2: (b * s + t).astype(w.dtype)})
        return True

    def _into_gemm(self, gemm, bn, s, t) -> bool:
        if gemm.input[1] not in self.constants or (len(gemm.input) > 2 and gemm.input[2] and
                                                   gemm.input[2] not in self.constants):
            return False
        attrs = {a.name: helper.get_attribute_value(a) for a in gemm.attribute}
        b = self.constants.value(gemm.input[1])
        trans_b = bool(attrs.get("transB", 0))
        if b.ndim != 2 or (b.shape[0] if trans_b else b.shape[1]) != s.size:
            return False
        b2 = b.astype(np.float64) * (s[:, None] if trans_b else s[None, :])
        beta = float(attrs.get("beta", 1.0))
        c = self.constants.value(gemm.input[2]).astype(np.float64) if len(gemm.input) > 2 and gemm.input[2] else 0.0
        c2 = np.asarray(beta * c * s + t)
        if c2.ndim > 2:
            return False
        self._rewrite(gemm, bn, {1: b2.astype(b.dtype), 2: c2.astype(b.dtype)})
        set_float_attribute(gemm, "beta", 1.0)
        return True

    def _into_matmul(self, matmul, bn, s, t) -> bool:
        if matmul.input[1] not in self.constants:
            return False
        b = self.constants.value(matmul.input[1])
        if b.ndim != 2 or b.shape[1] != s.size or self._rank(matmul.input[0]) != 2:
            return False
        self._rewrite(matmul, bn, {1: (b.astype(np.float64) * s[None, :]).astype(b.dtype)})
        # The shift becomes an Add after the MatMul, written where the BN was.
        product = self._fresh(f"{matmul.output[0]}_scaled")
        shift = self._add_initializer(f"{bn.name or bn.output[0]}_shift", t.astype(b.dtype))
        add = helper.make_node("Add", [product, shift], [matmul.output[0]], name=f"{bn.name or bn.output[0]}_shift")
        matmul.output[0] = product
        self.graph.node.insert(list(self.graph.node).index(matmul) + 1, add)
        return True

    # --- edits ------------------------------------------------------------------------------
    def _rank(self, name: str) -> int:
        if self.ranks is None:
            types = infer_types(self.model, model_name=self.ctx.model_name).types
            self.ranks = {k: len(v.shape) for k, v in types.items() if v.shape is not None}
        return self.ranks.get(name, -1)

    def _rewrite(self, owner, bn, new_inputs) -> None:
        """owner's inputs replaced by new constants, its output renamed to the BN's, BN removed."""
        for index, value in sorted(new_inputs.items()):
            base = owner.input[index] if index < len(owner.input) and owner.input[index] else f"{owner.name}_bias"
            name = self._add_initializer(f"{base}_bnfold", value)
            while len(owner.input) <= index:
                owner.input.append("")
            owner.input[index] = name
        remove_value_info(self.graph, [owner.output[0]])
        owner.output[0] = bn.output[0]
        remove_nodes(self.graph, [bn])

    def _fresh(self, name: str) -> str:
        candidate, i = name, 1
        while candidate in self.taken:
            candidate, i = f"{name}_{i}", i + 1
        self.taken.add(candidate)
        return candidate

    def _add_initializer(self, name: str, value: np.ndarray) -> str:
        name = self._fresh(name)
        self.graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        self.constants.add(name, value)
        return name


