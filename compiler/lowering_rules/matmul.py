from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule

FLOATS = ("float32", "float16")


@lowering_rule("MatMul")
def lower_matmul(ctx: NodeContext) -> KernelCall:
    """numpy.matmul semantics (batched, broadcast batch dims, 1-D operands promoted)."""
    ctx.require_inputs(2)
    ctx.require_dtypes(FLOATS)
    return KernelCall("MatMul", list(ctx.node.input))
