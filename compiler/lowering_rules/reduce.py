from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule

NUMERIC = ("float32", "float16", "float64", "int32", "int64")
# Ops whose `axes` moved from an attribute to an optional input, and the opset it moved in.
_AXES_INPUT_SINCE = {"ReduceSum": 13}
_DEFAULT_AXES_INPUT_SINCE = 18
_OPS = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
        "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")


@lowering_rule(*_OPS)
def lower_reduce(ctx: NodeContext) -> KernelCall:
    """`axes` (attribute or constant input) normalized and sorted; empty axes mean every axis,
    or none with noop_with_empty_axes. keepdims lives in the static output shape."""
    op = ctx.node.op_type
    ctx.require_inputs(1, 2)
    allowed = NUMERIC + (("int8", "uint8", "bool") if op in ("ReduceMax", "ReduceMin") else ())
    if op == "ReduceLogSumExp":
        allowed = ("float32", "float16", "float64")
    ctx.require_dtypes(allowed, [0])
    rank = ctx.rank(0)
    if ctx.opset >= _AXES_INPUT_SINCE.get(op, _DEFAULT_AXES_INPUT_SINCE):
        axes = [int(a) for a in ctx.constant_input(1).reshape(-1)] if ctx.has_input(1) else []
    else:
        axes = [int(a) for a in ctx.attr("axes", [])]
    if not axes and not int(ctx.attr("noop_with_empty_axes", 0)):
        axes = list(range(rank))
    axes = sorted({ctx.normalize_axis(a, rank) for a in axes})
    return KernelCall(op, [ctx.node.input[0]], {"axes": axes})
