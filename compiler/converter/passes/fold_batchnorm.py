"""Inference BatchNormalization folded into the op that produces its input.

BN(y) = s·y + t per channel, s = scale / sqrt(var + eps), t = B − mean·s. When y comes from an
op whose weights are constants and which has no other reader, the scaling goes into those
weights and t into its bias, and the BN disappears (compiler/onnx_graph/channel_affine.py,
shared with fold_conv_affine): Conv / ConvTranspose / Gemm with constant weights, and MatMul
with constant 2-D B and 2-D A (BN's channel axis 1 is then the last one).

The arithmetic is done in float64 and stored in the weights' dtype; the pass runs before
float_to_half, so an fp16 model gets the folded weights rounded once. A BN with nothing to
fold into stays a BatchNormalization kernel: one pass over the data, where Mul + Add would
be two (measured in docs/benchmarks.md, "Convolution and fusions")."""
import numpy as np
from onnx import helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph.channel_affine import ChannelAffineFolder
from compiler.onnx_graph.graph_edit import consumers, producers

_DEFAULT_DOMAINS = ("", "ai.onnx")


@register("fold_batchnorm", kind="fuse")
def fold_batchnorm(model, ctx):
    """Fold inference BatchNormalization into a preceding Conv/ConvTranspose/Gemm/MatMul's weights."""
    graph = model.graph
    if not any(n.op_type == "BatchNormalization" and n.domain in _DEFAULT_DOMAINS for n in graph.node):
        return model
    folder = ChannelAffineFolder(model, ctx.model_name, suffix="bnfold")
    outputs = folder.outputs
    for bn in [n for n in graph.node if n.op_type == "BatchNormalization" and n.domain in _DEFAULT_DOMAINS]:
        readers = consumers(graph)
        owner = producers(graph).get(bn.input[0])
        if owner is None or owner.domain not in _DEFAULT_DOMAINS or not _foldable_bn(bn, readers, outputs, folder):
            continue
        if len(readers.get(bn.input[0], [])) != 1 or bn.input[0] in outputs:
            continue
        if owner.op_type == "MatMul" and folder.rank(owner.input[0]) != 2:
            continue  # BN's channel axis is 1: the weights' axis only for a 2-D product
        s, t = _scale_shift(bn, folder)
        if folder.fold(owner, s, t, bn.output[0], [bn]):
            ctx.logger.debug("fold_batchnorm: %s folded into %s '%s'", bn.name, owner.op_type, owner.name)
    return model


def _foldable_bn(bn, readers, outputs, folder) -> bool:
    attrs = {a.name: helper.get_attribute_value(a) for a in bn.attribute}
    if attrs.get("training_mode", 0):
        return False
    if any(out and (readers.get(out) or out in outputs) for out in bn.output[1:]):
        return False  # running statistics are read: not the inference form
    return len(bn.input) == 5 and all(name in folder.constants for name in bn.input[1:])


def _scale_shift(bn, folder):
    eps = 1e-5
    for a in bn.attribute:
        if a.name == "epsilon":
            eps = a.f
    scale, bias, mean, var = (folder.constants.value(n).astype(np.float64).reshape(-1) for n in bn.input[1:])
    s = scale / np.sqrt(var + eps)
    return s, bias - mean * s
