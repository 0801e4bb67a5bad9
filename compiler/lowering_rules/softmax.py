from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule

FLOATS = ("float32", "float16")


@lowering_rule("Softmax", "LogSoftmax")
def lower_softmax(ctx: NodeContext) -> KernelCall:
    """(Log)Softmax along `axis`; before opset 13 over the flattened trailing dims [axis:]."""
    ctx.require_inputs(1)
    ctx.require_dtypes(FLOATS)
    rank = ctx.rank(0)
    if rank == 0:
        raise ctx.error(f"{ctx.node.op_type} of a scalar is not defined (input has rank 0)")
    coerce_2d = 1 if ctx.opset < 13 else 0
    axis = ctx.attr("axis", 1 if coerce_2d else -1)
    return KernelCall(ctx.node.op_type, [ctx.node.input[0]],
                      {"axis": ctx.normalize_axis(int(axis), rank), "coerce_2d": coerce_2d})
