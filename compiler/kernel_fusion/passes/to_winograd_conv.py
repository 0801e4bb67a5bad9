"""3x3 stride-1 NchwcConvs -> NchwcWinogradConv (compiler/onnx_graph/winograd.py), with the weights
transformed here, once, so the runtime does no weight work.

Rewritten: an NchwcConv (written by to_nchwc_layout, which runs before) on a blocked float32 or
float16 X,
group 1, window 3x3, strides 1, dilations 1, with constant weights, whose layer class the
policy picks (PassContext.winograd):
  auto   F(4x4,3x3) or F(2x2,3x3) where it measured faster than the direct NchwcConv tiles
         (choose_tile; docs/benchmarks.md, "Winograd convolutions"), the direct convolution elsewhere;
  f2x2 / f4x4  every such layer with that tile (for measuring the classes);
  off    none (the pass is left out of the pipeline).
The epilogue (bias, Sum, activation) and the pads carry over; the transformed weights are a new
initializer `<W>__winograd<m>` (float32 in a float16 model too: winograd.transform_weights), the
blocked ones go when nobody reads them any more. A float16 model takes the same policy: its
Winograd kernel reads and writes float16 activations as the direct tiles do."""
from typing import Optional

import onnx
from onnx import TensorProto, helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph import nchwc, winograd
from compiler.onnx_graph.graph_edit import node_uses, remove_initializers
from compiler.onnx_graph.graph_rewrite import GraphRewrite
from compiler.onnx_graph.internal_ops import DOMAIN
from compiler.onnx_graph.type_inference import infer_types

_FORCED_TILES = {"f2x2": 2, "f4x4": 4}  # the policies that force a tile (CompilerOptions.winograd)
_KEPT_ATTRS = ("pads", "activation", "activation_params")

# The layer classes where Winograd beat the direct tiles (ResNet50's 3x3 layers at batch 1 and
# 8, 2 threads, benchmarks/bench_winograd.py; docs/benchmarks.md "Winograd convolutions"):
# F(4x4,3x3) from 32 output tiles, F(2x2,3x3) from 64 (both threads get chunks long enough to
# amortize streaming the transformed weights). F(4x4,3x3) only on planes of at least
# F4_MIN_SIDE: there it is 1.15-1.4x faster than F(2x2,3x3), but through a network its error is
# about 1.2-1.5x the direct convolution's, which the 64x64 ResNet50 of the architecture tests
# (all 3x3 planes 16x16 or smaller) cannot afford (1.18e-4 against the 1e-4 fp32 bar with F(4x4) throughout; 8.7e-5 with F(2x2), whose
# error is below the direct convolution's).
MIN_TILES = {4: 32, 2: 64}
F4_MIN_SIDE = 28
# Fewer tiles than that take F(2x2,3x3) too when the layer has at least WIDE_MIN_CHANNELS
# outputs and WIDE_MIN_TILES tiles (a 7x7 plane): the kernel then splits the output channels
# over the threads, each streaming its share of U once for all the tiles (ResNet50 at batch 1,
# 2 threads, quiet machine: 256->256 at 14x14 0.91 ms against the direct 1.27, 512->512 at 7x7
# 1.52 against 2.12; float16 0.90 / 1.33 and 1.23 / 1.48). Layers with fewer outputs are not
# measured and keep the direct convolution.
WIDE_MIN_CHANNELS = 256
WIDE_MIN_TILES = 16


def choose_tile(n: int, oh: int, ow: int, out_channels: int = 0) -> Optional[int]:
    """The measured rule of policy auto: 4 (F(4x4,3x3)), 2 (F(2x2,3x3)) or None (the direct
    convolution) for a layer of n images of oh x ow outputs with out_channels outputs."""
    for tile in (4, 2):
        if tile == 4 and min(oh, ow) < F4_MIN_SIDE:
            continue
        tiles = n * -(-oh // tile) * -(-ow // tile)
        if tiles >= MIN_TILES[tile]:
            return tile
        if tile == 2 and out_channels >= WIDE_MIN_CHANNELS and tiles >= WIDE_MIN_TILES:
            return tile
    return None


@register("to_winograd_conv", kind="fuse")
def to_winograd_conv(model, ctx):
    """Eligible 3x3 stride-1 NchwcConvs -> NchwcWinogradConv with compile-time transformed weights."""
    policy = ctx.winograd
    if policy == "off" or not any(n.op_type == "NchwcConv" and n.domain == DOMAIN for n in model.graph.node):
        return model
    rewrite = GraphRewrite(model, ctx.model_name)
    types = infer_types(model, model_name=ctx.model_name).types
    replaced = set()
    for node in model.graph.node:
        tile = _tile(node, rewrite, types, _FORCED_TILES.get(policy))
        if tile is None:
            continue
        weights = node.input[1]
        u = rewrite.add_initializer(f"{weights}__winograd{tile}",
                                    winograd.transform_weights(rewrite.constants.value(weights), tile))
        replaced.add(weights)
        kept = [a for a in node.attribute if a.name in _KEPT_ATTRS]
        node.op_type = "NchwcWinogradConv"
        node.input[1] = u
        del node.attribute[:]
        node.attribute.extend(kept)
    if replaced:
        read = {o.name for o in model.graph.output}
        for node in model.graph.node:
            read.update(node_uses(node))
        remove_initializers(model.graph, replaced - read)
    return model


def _tile(node: onnx.NodeProto, rewrite: GraphRewrite, types, forced: Optional[int]) -> Optional[int]:
    if node.op_type != "NchwcConv" or node.domain != DOMAIN or node.input[1] not in rewrite.constants:
        return None
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if (int(attrs.get("group", 1)) != 1 or list(attrs.get("kernel_shape", [])) != [3, 3]
            or list(attrs.get("strides", [1, 1])) != [1, 1] or list(attrs.get("dilations", [1, 1])) != [1, 1]):
        return None
    x, y = types.get(node.input[0]), types.get(node.output[0])
    if (x is None or y is None or x.elem_type not in (TensorProto.FLOAT, TensorProto.FLOAT16) or not x.is_static
            or not y.is_static):
        return None
    if len(x.shape) != 5 or x.shape[4] != nchwc.BLOCK or len(y.shape) != 5:
        return None
    w = rewrite.constants.value(node.input[1])
    if w.ndim != 6 or tuple(w.shape[2:4]) != (3, 3):
        return None
    n, oh, ow = x.shape[0], y.shape[2], y.shape[3]
    if forced is not None:
        return forced
    return choose_tile(n, oh, ow, y.shape[1] * y.shape[4])
