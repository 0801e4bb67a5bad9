"""NchwcWinogradConv (compiler/onnx_graph/winograd.py; written by to_winograd_conv): a 3x3,
stride-1 convolution on the blocked layout with weights transformed for Winograd's F(m x m, 3x3),
float32 or float16 activations (U float32 or float16 either way). The rule checks the shapes the
kernel assumes, so a malformed node fails here, naming it, rather than in the runtime."""
from compiler.lowering_rules.epilogue import with_epilogue
from compiler.lowering_rules.matmul import FLOATS
from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule
from compiler.onnx_graph import winograd
from compiler.onnx_graph.internal_ops import DOMAIN


@lowering_rule(f"{DOMAIN}::NchwcWinogradConv")
def lower_nchwc_winograd_conv(ctx: NodeContext) -> KernelCall:
    """3x3 stride-1 Conv on a blocked X with transformed weights U, bias, sum and activation."""
    ctx.require_inputs(2, 4)
    ctx.require_dtypes(FLOATS)
    x, u = list(ctx.input_type(0).shape), list(ctx.input_type(1).shape)
    pads = [int(p) for p in ctx.attr("pads", [0, 0, 0, 0])]
    try:
        expected = winograd.output_shape(x, u, pads)
    except ValueError as e:
        raise ctx.error(str(e)) from None
    m = expected[1] * 8
    if ctx.has_input(2) and list(ctx.input_type(2).shape) != [m]:
        raise ctx.error(f"bias '{ctx.node.input[2]}' has shape {ctx.input_type(2).shape_text()}, expected [{m}]")
    if tuple(ctx.output_type(0).shape) != expected:
        raise ctx.error(f"output '{ctx.node.output[0]}' has shape {ctx.output_type(0).shape_text()}, expected "
                        f"{list(expected)}")
    return with_epilogue(ctx, KernelCall("NchwcWinogradConv", [], {"pads": pads}), "NchwcWinogradConv", FLOATS)
