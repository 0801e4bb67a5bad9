from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule


@lowering_rule("Concat")
def lower_concat(ctx: NodeContext) -> KernelCall:
    """Concatenation along a non-negative axis; any dtype."""
    if not ctx.node.input:
        raise ctx.error("Concat needs at least one input")
    axis = ctx.attr("axis")
    if axis is None:
        raise ctx.error("missing required attribute 'axis'")
    for i in range(len(ctx.node.input)):
        ctx.input_type(i)  # each operand must have a static type
    return KernelCall("Concat", list(ctx.node.input),
                      {"axis": ctx.normalize_axis(int(axis), len(ctx.output_type().shape))})
