"""Per-channel Mul/Add/Sub/Div by constants after Conv/ConvTranspose/Gemm/MatMul folded into
the op's weights and bias.

tf2onnx leaves the BatchNorm of a Keras depthwise layer as `Mul` by a [1,C,1,1] constant and
`Add` of one (it cannot fold them into a depthwise kernel itself), and scaled outputs
(y·c, y/c, y−c) appear in other exporters' graphs. Walking forward from a producer whose
weights are constants, over tensors that have one reader and are not graph outputs, the pass
accumulates y = s·x + t over any chain of

  Mul(x, c), Mul(c, x), Div(x, c), Add(x, c), Add(c, x), Sub(x, c), Sub(c, x)

where c is a compile-time constant that is per output channel of the producer (after right
alignment, every axis 1 except the channel axis, which is 1 or C: [C,1,1], [1,C,1,1] for
Conv; [C], [1,C] for Gemm/MatMul, whose channel axis is the last) or a scalar, and whose
result has the producer's static shape (no broadcasting past it). s and t (float64) then go
into the weights and bias (compiler/onnx_graph/channel_affine.py, shared with
fold_batchnorm) and the chain disappears; the producer writes the chain's last tensor.

Left alone: a constant that varies along another axis (the weights cannot hold it), an
intermediate tensor with other readers or that is a graph output, shapes that are not static,
Div(c, x) (not affine), a divisor containing 0 and non-finite constants. A MatMul followed
only by Adds is left to fuse_epilogue (it takes them as its bias; folding would only move the
Add). Runs before float_to_half so that fp16 weights are rounded once."""
from typing import List, Optional

import numpy as np
import onnx

from compiler.converter.pass_registry import register
from compiler.onnx_graph.channel_affine import FOLDABLE_PRODUCERS, ChannelAffineFolder, channel_axis
from compiler.onnx_graph.graph_edit import consumers
from compiler.onnx_graph.type_inference import infer_types

_DEFAULT_DOMAINS = ("", "ai.onnx")
_AFFINE_OPS = ("Mul", "Add", "Sub", "Div")
_FLOAT_TYPES = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE)


@register("fold_conv_affine", kind="fuse")
def fold_conv_affine(model, ctx):
    """Fold per-channel Mul/Add/Sub/Div by constants after Conv/ConvTranspose/Gemm/MatMul into its weights and bias."""
    graph = model.graph
    owners = [n for n in graph.node if n.op_type in FOLDABLE_PRODUCERS and n.domain in _DEFAULT_DOMAINS]
    if not owners or not any(n.op_type in _AFFINE_OPS for n in graph.node):
        return model
    types = infer_types(model, model_name=ctx.model_name).types
    folder = ChannelAffineFolder(model, ctx.model_name, suffix="affinefold")
    outputs = folder.outputs
    readers = consumers(graph)
    for owner in owners:
        out_type = types.get(owner.output[0])
        if out_type is None or not out_type.is_static or out_type.elem_type not in _FLOAT_TYPES or not out_type.shape:
            continue
        if not _weights_cover_channels(owner, out_type, folder):
            continue
        chain = _Chain(owner, out_type, folder)
        cur = owner.output[0]
        while True:
            r = readers.get(cur, [])
            if len(r) != 1 or cur in outputs or r[0].domain not in _DEFAULT_DOMAINS or r[0].op_type not in _AFFINE_OPS:
                break
            node = r[0]
            result = types.get(node.output[0])
            if result is None or result.shape != out_type.shape or result.elem_type != out_type.elem_type:
                break
            if not chain.absorb(node, cur):
                break
            cur = node.output[0]
        if not chain.nodes or (owner.op_type == "MatMul" and np.all(chain.s == 1.0)):
            continue
        ops = [n.op_type for n in chain.nodes]
        if folder.fold(owner, chain.s, chain.t, cur, chain.nodes):
            ctx.logger.debug("fold_conv_affine: %s folded into %s '%s'", ops, owner.op_type, owner.name)
            readers = consumers(graph)
    return model


def _weights_cover_channels(owner: onnx.NodeProto, out_type, folder: ChannelAffineFolder) -> bool:
    """Only constant weights with at least one element per output channel can take a fold. The
    channel axis and count come from the output's type, which may be a declared (and absurd)
    shape when inference cannot type the node, so they are checked before anything is
    allocated from them."""
    axis = channel_axis(owner.op_type, len(out_type.shape))
    if len(owner.input) < 2 or owner.input[1] not in folder.constants or axis >= len(out_type.shape):
        return False
    return out_type.shape[axis] <= folder.constants.value(owner.input[1]).size


class _Chain:
    """y = s·x + t accumulated over the absorbed nodes, s and t per output channel."""

    def __init__(self, owner: onnx.NodeProto, out_type, folder: ChannelAffineFolder):
        self.rank = len(out_type.shape)
        self.axis = channel_axis(owner.op_type, self.rank)
        self.channels = out_type.shape[self.axis]
        self.folder = folder
        self.s = np.ones(self.channels)
        self.t = np.zeros(self.channels)
        self.nodes: List[onnx.NodeProto] = []

    def absorb(self, node: onnx.NodeProto, cur: str) -> bool:
        """Composes node (reading cur) into (s, t); False when it is not a per-channel affine map."""
        if len(node.input) != 2 or (node.input[0] == cur) == (node.input[1] == cur):
            return False
        x_first = node.input[0] == cur
        c = self._per_channel(node.input[1] if x_first else node.input[0])
        if c is None:
            return False
        op = node.op_type
        if op == "Mul":
            self.s, self.t = self.s * c, self.t * c
        elif op == "Add":
            self.t = self.t + c
        elif op == "Sub" and x_first:
            self.t = self.t - c
        elif op == "Sub":
            self.s, self.t = -self.s, c - self.t
        elif op == "Div" and x_first and np.all(c != 0.0):
            self.s, self.t = self.s / c, self.t / c
        else:
            return False
        self.nodes.append(node)
        return True

    def _per_channel(self, name: str) -> Optional[np.ndarray]:
        """The constant as a float64 vector of the channel count, or None when it is not a
        constant, not finite, or varies along another axis."""
        if name not in self.folder.constants:
            return None
        value = np.asarray(self.folder.constants.value(name))
        if value.ndim > self.rank or not np.issubdtype(value.dtype, np.floating):
            return None
        aligned = value.reshape((1,) * (self.rank - value.ndim) + value.shape)
        if any(d != 1 for i, d in enumerate(aligned.shape) if i != self.axis):
            return None
        if aligned.shape[self.axis] not in (1, self.channels):
            return None
        vector = np.broadcast_to(aligned.reshape(-1).astype(np.float64), (self.channels,))
        return vector if np.all(np.isfinite(vector)) else None
