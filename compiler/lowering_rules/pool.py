from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule
from compiler.lowering_rules.window_attrs import window_attrs

FLOATS = ("float32", "float16")
MAX_POOL_TYPES = ("float32", "float16", "int8", "uint8", "int32", "int64")


def _window(ctx: NodeContext):
    kernel = ctx.attr("kernel_shape")
    if kernel is None:
        raise ctx.error("missing required attribute 'kernel_shape'")
    return window_attrs(ctx, kernel)


@lowering_rule("MaxPool")
def lower_max_pool(ctx: NodeContext) -> KernelCall:
    """Max over windows (ceil_mode is in the static output shape); optional Indices output."""
    ctx.require_inputs(1)
    ctx.require_dtypes(MAX_POOL_TYPES)
    attrs = _window(ctx)
    attrs["storage_order"] = int(ctx.attr("storage_order", 0))
    return KernelCall("MaxPool", [ctx.node.input[0]], attrs)


@lowering_rule("AveragePool")
def lower_average_pool(ctx: NodeContext) -> KernelCall:
    """Mean over windows; count_include_pad chooses the divisor."""
    ctx.require_inputs(1)
    ctx.require_dtypes(FLOATS)
    attrs = _window(ctx)
    attrs["count_include_pad"] = int(ctx.attr("count_include_pad", 0))
    return KernelCall("AveragePool", [ctx.node.input[0]], attrs)


@lowering_rule("GlobalAveragePool", "GlobalMaxPool")
def lower_global_pool(ctx: NodeContext) -> KernelCall:
    """One window per [N, C] plane."""
    ctx.require_inputs(1)
    ctx.require_dtypes(FLOATS)
    return KernelCall(ctx.node.op_type, [ctx.node.input[0]])
