from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule

COMPARABLE = ("float32", "float16", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
              "uint64", "bool")
POW_TYPES = ("float32", "float16", "float64", "int32", "int64", "uint32", "uint64")


@lowering_rule("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual")
def lower_comparison(ctx: NodeContext) -> KernelCall:
    """Broadcast comparison of one dtype, bool result."""
    ctx.require_inputs(2)
    ctx.require_dtypes(COMPARABLE)
    return KernelCall(ctx.node.op_type, list(ctx.node.input))


@lowering_rule("And", "Or", "Xor", "Not")
def lower_logical(ctx: NodeContext) -> KernelCall:
    """Boolean logic with broadcasting."""
    ctx.require_inputs(1 if ctx.node.op_type == "Not" else 2)
    ctx.require_dtypes(("bool",))
    return KernelCall(ctx.node.op_type, list(ctx.node.input))


@lowering_rule("Where")
def lower_where(ctx: NodeContext) -> KernelCall:
    """condition ? X : Y, three-way broadcast, any value dtype."""
    ctx.require_inputs(3)
    ctx.require_dtypes(("bool",), [0])
    return KernelCall("Where", list(ctx.node.input))


@lowering_rule("Pow")
def lower_pow(ctx: NodeContext) -> KernelCall:
    """Base and exponent may have different numeric dtypes; the result has the base's."""
    ctx.require_inputs(2)
    ctx.require_dtypes(POW_TYPES)
    return KernelCall("Pow", list(ctx.node.input))
