"""y = s·x + t per output channel, folded into the constant weights of the op that produces x.

Shared by the converter passes fold_batchnorm (s, t from a BatchNormalization) and
fold_conv_affine (s, t from a chain of Mul/Add/Sub/Div by constants). The producer takes the
scale into its weights and the shift into its bias, and stops writing x: it writes the tensor
that the last folded node wrote, so graph outputs keep their names.

  Conv / ConvTranspose   W scaled per output channel, bias b' = b·s + t
  Gemm (constant B)      op(B) columns scaled, C' = beta·C·s + t, beta = 1
  MatMul (constant 2-D B; the channel axis is the output's last one)
                         B columns scaled, then Add(t) when t is not zero (fuse_epilogue takes
                         it later as FusedMatMul's bias)

The arithmetic is done in float64 and stored in the weights' dtype, so weights are rounded
once. New weights get new names (the originals may be shared with other readers);
eliminate_unused_initializers drops the old ones. A unit scale (only shifts) keeps the
weights; a zero shift adds no bias where there was none."""
from typing import Dict, Optional, Sequence

import numpy as np
import onnx
from onnx import helper

from compiler.onnx_graph.graph_edit import fresh_name, remove_nodes, remove_value_info, set_float_attribute
from compiler.onnx_graph.graph_rewrite import GraphRewrite
from compiler.onnx_graph.type_inference import infer_types

# Producers whose output channels can absorb a per-channel scale and shift.
FOLDABLE_PRODUCERS = ("Conv", "ConvTranspose", "Gemm", "MatMul")


def channel_axis(op_type: str, out_rank: int) -> int:
    """Axis of the producer's output that indexes its output channels."""
    return 1 if op_type in ("Conv", "ConvTranspose") else out_rank - 1


class ChannelAffineFolder(GraphRewrite):
    """Folds per-channel (s, t) into a producer of FOLDABLE_PRODUCERS; one instance per graph
    edit session (it tracks the names it has taken and the constants it has added)."""

    def __init__(self, model: onnx.ModelProto, model_name: str, suffix: str):
        super().__init__(model, model_name)
        self.suffix = suffix
        self.ranks: Optional[Dict[str, int]] = None  # computed on first need

    def fold(self, owner: onnx.NodeProto, s: np.ndarray, t: np.ndarray, result: str,
             folded: Sequence[onnx.NodeProto]) -> bool:
        """Makes `owner` compute s·owner(x) + t and write `result`, and removes the `folded`
        nodes (those that computed the scaling). s and t: float64 vectors of the output channel
        count. False (graph untouched) when owner's weights cannot take them."""
        into = {"Conv": self._into_conv, "ConvTranspose": self._into_conv_transpose, "Gemm": self._into_gemm,
                "MatMul": self._into_matmul}.get(owner.op_type)
        return into is not None and into(owner, s, t, result, folded)

    def rank(self, name: str) -> int:
        """Rank of tensor `name` from shape inference (-1 when unknown)."""
        if self.ranks is None:
            types = infer_types(self.model, model_name=self.model_name).types
            self.ranks = {k: len(v.shape) for k, v in types.items() if v.shape is not None}
        return self.ranks.get(name, -1)

    # --- the producers ----------------------------------------------------------------------
    def _bias(self, node, index: int):
        """(value in float64 or None when absent, True when usable)."""
        if len(node.input) <= index or not node.input[index]:
            return None, True
        if node.input[index] not in self.constants:
            return None, False
        return self.constants.value(node.input[index]).astype(np.float64), True

    def _into_conv(self, conv, s, t, result, folded) -> bool:
        b, ok = self._bias(conv, 2)
        if conv.input[1] not in self.constants or not ok:
            return False
        w = self.constants.value(conv.input[1])
        if w.ndim < 3 or w.shape[0] != s.size or not _is_float(w):
            return False
        new = {} if _is_one(s) else {1: (w.astype(np.float64) * s.reshape((-1,) + (1,) * (w.ndim - 1))).astype(w.dtype)}
        if b is not None or np.any(t):
            new[2] = ((0.0 if b is None else b) * s + t).astype(w.dtype)
        self._rewrite(conv, new, result, folded)
        return True

    def _into_conv_transpose(self, conv, s, t, result, folded) -> bool:
        b, ok = self._bias(conv, 2)
        if conv.input[1] not in self.constants or not ok:
            return False
        w = self.constants.value(conv.input[1])  # [C, M/group, k...]
        group = next((a.i for a in conv.attribute if a.name == "group"), 1)
        if w.ndim < 3 or w.shape[1] * group != s.size or w.shape[0] % group or not _is_float(w):
            return False
        new = {}
        if not _is_one(s):
            grouped = w.astype(np.float64).reshape((group, w.shape[0] // group, w.shape[1]) + w.shape[2:])
            grouped = grouped * s.reshape((group, 1, w.shape[1]) + (1,) * (w.ndim - 2))
            new[1] = grouped.reshape(w.shape).astype(w.dtype)
        if b is not None or np.any(t):
            new[2] = ((0.0 if b is None else b) * s + t).astype(w.dtype)
        self._rewrite(conv, new, result, folded)
        return True

    def _into_gemm(self, gemm, s, t, result, folded) -> bool:
        c, ok = self._bias(gemm, 2)
        if gemm.input[1] not in self.constants or not ok:
            return False
        attrs = {a.name: helper.get_attribute_value(a) for a in gemm.attribute}
        b = self.constants.value(gemm.input[1])
        trans_b = bool(attrs.get("transB", 0))
        if b.ndim != 2 or (b.shape[0] if trans_b else b.shape[1]) != s.size or not _is_float(b):
            return False
        if c is not None and not _broadcasts_over_columns(self.constants.value(gemm.input[2]), s.size):
            return False
        columns = s[:, None] if trans_b else s[None, :]
        new = {} if _is_one(s) else {1: (b.astype(np.float64) * columns).astype(b.dtype)}
        if c is not None or np.any(t):
            c2 = np.asarray(float(attrs.get("beta", 1.0)) * (0.0 if c is None else c) * s + t)
            if c2.ndim > 2:
                return False
            new[2] = c2.astype(b.dtype)
        self._rewrite(gemm, new, result, folded)
        if 2 in new:
            set_float_attribute(gemm, "beta", 1.0)
        return True

    def _into_matmul(self, matmul, s, t, result, folded) -> bool:
        if matmul.input[1] not in self.constants:
            return False
        b = self.constants.value(matmul.input[1])
        if b.ndim != 2 or b.shape[1] != s.size or not _is_float(b):
            return False
        self._rewrite(matmul, {} if _is_one(s) else {1: (b.astype(np.float64) * s[None, :]).astype(b.dtype)},
                      result, folded)
        if np.any(t):
            # The shift becomes an Add after the MatMul, writing the result.
            product = fresh_name(f"{result}_scaled", self.taken)
            shift = self.add_initializer(f"{result}_shift", t.astype(b.dtype))
            add = helper.make_node("Add", [product, shift], [result],
                                   name=fresh_name(f"{matmul.name or result}_shift", self.taken))
            matmul.output[0] = product
            self.graph.node.insert(list(self.graph.node).index(matmul) + 1, add)
        return True

    # --- edits ------------------------------------------------------------------------------
    def _rewrite(self, owner, new_inputs, result: str, folded) -> None:
        """owner's inputs replaced by new constants, its output renamed to `result`, the folded
        nodes removed."""
        for index, value in sorted(new_inputs.items()):
            base = owner.input[index] if index < len(owner.input) and owner.input[index] else f"{owner.name}_bias"
            name = self.add_initializer(f"{base}_{self.suffix}", value)
            while len(owner.input) <= index:
                owner.input.append("")
            owner.input[index] = name
        remove_value_info(self.graph, [owner.output[0]] + [n.output[0] for n in folded if n.output[0] != result])
        owner.output[0] = result
        remove_nodes(self.graph, folded)



def _is_one(scale: np.ndarray) -> bool:
    """A unit scale leaves the weights as they are (no copy under a new name)."""
    return bool(np.all(scale == 1.0))


def _is_float(value: np.ndarray) -> bool:
    return np.issubdtype(value.dtype, np.floating)


def _broadcasts_over_columns(c: np.ndarray, columns: int) -> bool:
    """A float Gemm bias that the per-column scale can multiply: Gemm's C broadcasts to [M, N],
    so its last axis must hold 1 or N values (an invalid model can declare any C)."""
    return _is_float(c) and c.ndim <= 2 and (c.ndim == 0 or c.shape[-1] in (1, columns))
