from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule

FLOATS = ("float32", "float16")


@lowering_rule("Gemm")
def lower_gemm(ctx: NodeContext) -> KernelCall:
    """Y = alpha * op(A) op(B) + beta * C; every attribute explicit."""
    ctx.require_inputs(2, 3)
    ctx.require_dtypes(FLOATS)
    for i in (0, 1):
        if ctx.rank(i) != 2:
            raise ctx.error(f"input '{ctx.node.input[i]}' must be 2-D, got shape {ctx.input_type(i).shape_text()}")
    inputs = [ctx.node.input[0], ctx.node.input[1]] + ([ctx.node.input[2]] if ctx.has_input(2) else [])
    attrs = {"alpha": float(ctx.attr("alpha", 1.0)), "beta": float(ctx.attr("beta", 1.0)),
             "transA": int(ctx.attr("transA", 0)), "transB": int(ctx.attr("transB", 0))}
    return KernelCall("Gemm", inputs, attrs)
