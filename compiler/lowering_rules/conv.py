from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule
from compiler.lowering_rules.window_attrs import window_attrs

FLOATS = ("float32", "float16")


def _inputs(ctx: NodeContext):
    return [ctx.node.input[0], ctx.node.input[1]] + ([ctx.node.input[2]] if ctx.has_input(2) else [])


@lowering_rule("Conv")
def lower_conv(ctx: NodeContext) -> KernelCall:
    """Convolution with auto_pad resolved into explicit pads."""
    ctx.require_inputs(2, 3)
    ctx.require_dtypes(FLOATS)
    w = ctx.input_type(1).shape
    attrs = window_attrs(ctx, ctx.attr("kernel_shape", w[2:]))
    if list(attrs["kernel_shape"]) != list(w[2:]):
        raise ctx.error(f"kernel_shape {attrs['kernel_shape']} differs from the weights' spatial dims {list(w[2:])}")
    del attrs["kernel_shape"]  # the kernel takes it from W
    attrs["group"] = int(ctx.attr("group", 1))
    return KernelCall("Conv", _inputs(ctx), attrs)


@lowering_rule("ConvTranspose")
def lower_conv_transpose(ctx: NodeContext) -> KernelCall:
    """Transposed convolution; output_shape and auto_pad become explicit pads (ONNX's formula:
    total = stride·(in−1) + output_padding + dilation·(k−1) + 1 − out, split with the odd pixel
    at the beginning unless auto_pad is SAME_UPPER)."""
    ctx.require_inputs(2, 3)
    ctx.require_dtypes(FLOATS)
    x, w = ctx.input_type(0).shape, ctx.input_type(1).shape
    rank = len(x) - 2
    if rank < 1 or rank > 3:
        raise ctx.error(f"input {ctx.input_type(0)} must be [N, C, spatial...] with 1 to 3 spatial dims")
    kernel = [int(k) for k in ctx.attr("kernel_shape", w[2:])]
    strides = [int(s) for s in ctx.attr("strides", [1] * rank)]
    dilations = [int(d) for d in ctx.attr("dilations", [1] * rank)]
    output_padding = [int(p) for p in ctx.attr("output_padding", [0] * rank)]
    auto_pad = ctx.attr("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    output_shape = ctx.attr("output_shape")
    if output_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out = [int(o) for o in output_shape][-rank:] if output_shape is not None else [i * s for i, s in
                                                                                        zip(x[2:], strides)]
        totals = [s * (i - 1) + p + d * (k - 1) + 1 - o
                  for i, s, p, d, k, o in zip(x[2:], strides, output_padding, dilations, kernel, out)]
        upper = auto_pad == "SAME_UPPER"
        pads = ([t // 2 if upper else t - t // 2 for t in totals] + [t - t // 2 if upper else t // 2 for t in totals])
    elif auto_pad == "VALID":
        pads = [0] * (2 * rank)
    else:
        pads = [int(p) for p in ctx.attr("pads", [0] * (2 * rank))]
    if min(pads, default=0) < 0:
        # A negative total padding means the requested output is larger than the full
        # transposed convolution: extend it with output_padding instead of negative pads.
        begins, ends = pads[:rank], pads[rank:]
        output_padding = [p - min(e, 0) for p, e in zip(output_padding, ends)]
        ends = [max(e, 0) for e in ends]
        if min(begins) < 0:
            raise ctx.error(f"output_shape {output_shape} needs negative leading pads {begins}")
        pads = begins + ends
    return KernelCall("ConvTranspose", _inputs(ctx),
                      {"strides": strides, "dilations": dilations, "pads": pads, "output_padding": output_padding,
                       "group": int(ctx.attr("group", 1))})
