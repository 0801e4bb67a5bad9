"""ChannelsLastDepthwiseConv (compiler/onnx_graph/internal_ops.py; written by
fuse_channels_last_depthwise): a depthwise convolution on channels-last X [N, H, W, C] with the
blocked depthwise weights, bias, and optionally LayerNormalization over C, float32 or float16.
The rule checks the shapes the kernel assumes, so a malformed node fails here, naming it,
rather than in the runtime."""
from compiler.lowering_rules.epilogue import FLOATS
from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule
from compiler.lowering_rules.window_attrs import window_attrs
from compiler.onnx_graph.internal_ops import DOMAIN, channels_last_depthwise_output_shape

_B, _SCALE, _LN_BIAS = 2, 3, 4


@lowering_rule(f"{DOMAIN}::ChannelsLastDepthwiseConv")
def lower_channels_last_depthwise(ctx: NodeContext) -> KernelCall:
    """X, W, then B when present, then Scale and LnBias (when present) with layer_norm = 1."""
    ctx.require_inputs(2, 5)
    ctx.require_dtypes(FLOATS)
    x, w = list(ctx.input_type(0).shape), list(ctx.input_type(1).shape)
    try:
        expected = channels_last_depthwise_output_shape(x, w, ctx.attr)
    except ValueError as e:
        raise ctx.error(str(e)) from None
    layer_norm = int(ctx.attr("layer_norm", 0))
    if layer_norm not in (0, 1):
        raise ctx.error(f"attribute 'layer_norm' is {layer_norm}, expected 0 or 1")
    if layer_norm != ctx.has_input(_SCALE) or (ctx.has_input(_LN_BIAS) and not layer_norm):
        raise ctx.error(f"inputs {list(ctx.node.input)} with layer_norm = {layer_norm}: Scale (input 3) is given "
                        f"exactly when layer_norm = 1, LnBias (input 4) only then")
    c = x[3]
    for i, what in ((_B, "bias B"), (_SCALE, "scale"), (_LN_BIAS, "LayerNormalization bias")):
        if ctx.has_input(i) and list(ctx.input_type(i).shape) != [c]:
            raise ctx.error(f"{what} '{ctx.node.input[i]}' has shape {ctx.input_type(i).shape_text()}, "
                            f"expected [{c}]")
    if tuple(ctx.output_type(0).shape) != tuple(expected):
        raise ctx.error(f"output '{ctx.node.output[0]}' has shape {ctx.output_type(0).shape_text()}, expected "
                        f"{list(expected)}")
    attrs = window_attrs(ctx, w[1:3], spatial=x[1:3])
    attrs["has_bias"] = int(ctx.has_input(_B))
    attrs["layer_norm"] = layer_norm
    if layer_norm:
        attrs["epsilon"] = float(ctx.attr("epsilon", 1e-5))
    inputs = [name for i, name in enumerate(ctx.node.input) if i < 2 or ctx.has_input(i)]
    return KernelCall("ChannelsLastDepthwiseConv", inputs, attrs)
