"""The NCHW8c layout's internal ops (compiler/onnx_graph/internal_ops.py, written by the pass
to_nchwc_layout; layouts in compiler/onnx_graph/nchwc.py), float32 or float16 (every tensor of a
node the same; float16 computes in float32, docs/popef.md §3). The step attrs are the
node's explicit window (kernel_shape, strides, dilations, pads [top, left, bottom, right]);
NchwcConv adds `group` and the epilogue's (rules/epilogue.py, as FusedConv). Each rule checks
the blocked shapes the kernel assumes, so a malformed node fails here, naming it, rather than
in the runtime."""
from compiler.lowering_rules.epilogue import FLOATS, with_epilogue
from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule
from compiler.lowering_rules.window_attrs import window_attrs
from compiler.onnx_graph import nchwc
from compiler.onnx_graph.internal_ops import DOMAIN, nchwc_conv_output_shape, nchwc_pool_output_shape


def _blocked_input(ctx: NodeContext, i: int = 0) -> list:
    shape = list(ctx.input_type(i).shape)
    if len(shape) != 5 or shape[4] != nchwc.BLOCK:
        raise ctx.error(f"input '{ctx.node.input[i]}' has shape {ctx.input_type(i).shape_text()}; a blocked tensor "
                        f"is [N, C/{nchwc.BLOCK}, H, W, {nchwc.BLOCK}]")
    return shape


def _require_output(ctx: NodeContext, expected) -> None:
    if tuple(ctx.output_type(0).shape) != tuple(expected):
        raise ctx.error(f"output '{ctx.node.output[0]}' has shape {ctx.output_type(0).shape_text()}, expected "
                        f"{list(expected)}")


def _channels_last(ctx: NodeContext) -> dict:
    """The reorders' attrs: {"channels_last": 1} when the plain side is [N, H, W, C], else none."""
    value = ctx.attr("channels_last", 0)
    if value not in (0, 1):
        raise ctx.error(f"attribute 'channels_last' is {value}, expected 0 or 1")
    return {"channels_last": 1} if value else {}


@lowering_rule(f"{DOMAIN}::ToNchwc")
def lower_to_nchwc(ctx: NodeContext) -> KernelCall:
    """[N, C, H, W] (C % 8 == 0; channels_last: [N, H, W, C]) -> [N, C/8, H, W, 8]."""
    ctx.require_inputs(1)
    ctx.require_dtypes(FLOATS)
    attrs = _channels_last(ctx)
    x = list(ctx.input_type(0).shape)
    layout = "[N, H, W, C]" if attrs else "[N, C, H, W]"
    if len(x) != 4 or not nchwc.can_block(nchwc.channels_first(x) if attrs else x):
        raise ctx.error(f"input '{ctx.node.input[0]}' has shape {ctx.input_type(0).shape_text()}; ToNchwc takes "
                        f"{layout} with C a multiple of {nchwc.BLOCK}")
    _require_output(ctx, nchwc.blocked_shape(nchwc.channels_first(x) if attrs else x))
    return KernelCall("ToNchwc", [ctx.node.input[0]], attrs)


@lowering_rule(f"{DOMAIN}::FromNchwc")
def lower_from_nchwc(ctx: NodeContext) -> KernelCall:
    """[N, Cb, H, W, 8] -> [N, Cb*8, H, W] (channels_last: [N, H, W, Cb*8])."""
    ctx.require_inputs(1)
    ctx.require_dtypes(FLOATS)
    attrs = _channels_last(ctx)
    plain = nchwc.plain_shape(_blocked_input(ctx))
    _require_output(ctx, nchwc.channels_last(plain) if attrs else plain)
    return KernelCall("FromNchwc", [ctx.node.input[0]], attrs)


@lowering_rule(f"{DOMAIN}::NchwcConv")
def lower_nchwc_conv(ctx: NodeContext) -> KernelCall:
    """Conv on a blocked (or, group 1, plain; channels_last: [N, H, W, C]) X with blocked weights,
    bias, sum and activation; group 1 on a blocked X also takes S, X's scale per image and input
    channel [N, C/8, 1, 1, 8] (the kernel's last input, has_input_scale = 1)."""
    ctx.require_inputs(2, 5)
    ctx.require_dtypes(FLOATS)
    x, w = list(ctx.input_type(0).shape), list(ctx.input_type(1).shape)
    channels_last = _channels_last(ctx)
    try:
        expected = nchwc_conv_output_shape(x, w, ctx.attr)
    except ValueError as e:
        raise ctx.error(str(e)) from None
    _, m, _, kernel = nchwc.conv_geometry(x, w, int(ctx.attr("group", 1)), bool(channels_last))
    if ctx.has_input(2) and list(ctx.input_type(2).shape) != [m]:
        raise ctx.error(f"bias '{ctx.node.input[2]}' has shape {ctx.input_type(2).shape_text()}, expected [{m}]")
    _require_output(ctx, expected)
    attrs = window_attrs(ctx, kernel, spatial=x[1:3] if channels_last else x[2:4])
    attrs["group"] = int(ctx.attr("group", 1))
    attrs.update(channels_last)
    call = with_epilogue(ctx, KernelCall("NchwcConv", [], attrs), "NchwcConv", FLOATS)
    if ctx.has_input(4):
        scale = [x[0], x[1], 1, 1, nchwc.BLOCK] if len(x) == 5 else None
        if scale is None or attrs["group"] != 1:
            raise ctx.error(f"input scale '{ctx.node.input[4]}' on a convolution with group {attrs['group']} and "
                            f"input {ctx.input_type(0).shape_text()}: it takes group 1 with a blocked X")
        if list(ctx.input_type(4).shape) != scale:
            raise ctx.error(f"input scale '{ctx.node.input[4]}' has shape {ctx.input_type(4).shape_text()}, "
                            f"expected {scale}")
        call = KernelCall(call.op, call.inputs + [ctx.node.input[4]], dict(call.attrs, has_input_scale=1))
    return call


def _pool_window(ctx: NodeContext) -> dict:
    """The window attributes of a blocked pool, its X and Y checked against them."""
    ctx.require_inputs(1)
    ctx.require_dtypes(FLOATS)
    x = _blocked_input(ctx)
    kernel = ctx.attr("kernel_shape")
    if kernel is None:
        raise ctx.error("missing required attribute 'kernel_shape'")
    attrs = window_attrs(ctx, kernel, spatial=x[2:4])
    expected = nchwc_pool_output_shape(x, ctx.node.attribute)
    if expected is None:
        raise ctx.error(f"the window {attrs} does not fit input {ctx.input_type(0).shape_text()}")
    _require_output(ctx, expected)
    return attrs


@lowering_rule(f"{DOMAIN}::NchwcMaxPool")
def lower_nchwc_max_pool(ctx: NodeContext) -> KernelCall:
    """Max over windows clipped to the input; ceil_mode is only in Y's static shape. zero_pads = 1
    (a folded zero Pad, ceil_mode 0): the pads hold zeros."""
    attrs = _pool_window(ctx)
    zero_pads = int(ctx.attr("zero_pads", 0))
    if zero_pads not in (0, 1):
        raise ctx.error(f"attribute 'zero_pads' is {zero_pads}, expected 0 or 1")
    if zero_pads and int(ctx.attr("ceil_mode", 0)):
        raise ctx.error("zero_pads = 1 with ceil_mode = 1 is not supported (a window past the zero pads)")
    return KernelCall("NchwcMaxPool", [ctx.node.input[0]], {**attrs, "zero_pads": zero_pads} if zero_pads else attrs)


@lowering_rule(f"{DOMAIN}::NchwcAveragePool")
def lower_nchwc_average_pool(ctx: NodeContext) -> KernelCall:
    """Mean over windows clipped to the input, divided by the taps inside the input or, with
    count_include_pad = 1, inside the padded input; ceil_mode is only in Y's static shape."""
    attrs = _pool_window(ctx)
    count_include_pad = int(ctx.attr("count_include_pad", 0))
    if count_include_pad not in (0, 1):
        raise ctx.error(f"attribute 'count_include_pad' is {count_include_pad}, expected 0 or 1")
    return KernelCall("NchwcAveragePool", [ctx.node.input[0]], {**attrs, "count_include_pad": count_include_pad})
