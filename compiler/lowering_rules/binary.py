from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule

NUMERIC = ("float32", "float16", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")


@lowering_rule("Add", "Sub", "Mul", "Div")
def lower_binary(ctx: NodeContext) -> KernelCall:
    """C = A op B with numpy broadcasting."""
    ctx.require_inputs(2)
    ctx.require_dtypes(NUMERIC)
    return KernelCall(ctx.node.op_type, list(ctx.node.input))
