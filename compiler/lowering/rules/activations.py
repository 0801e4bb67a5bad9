from compiler.lowering.rule_context import KernelCall, NodeContext
from compiler.lowering.rule_registry import lowering_rule

FLOATS = ("float32", "float16")
NUMERIC = ("float32", "float16", "int32", "int64")


@lowering_rule("Relu")
def lower_relu(ctx: NodeContext) -> KernelCall:
    """max(x, 0), elementwise."""
    ctx.require_inputs(1)
    ctx.require_dtypes(NUMERIC)
    return KernelCall("Relu", [ctx.node.input[0]])


@lowering_rule("Sigmoid", "Tanh")
def lower_float_activation(ctx: NodeContext) -> KernelCall:
    """Elementwise float activation."""
    ctx.require_inputs(1)
    ctx.require_dtypes(FLOATS)
    return KernelCall(ctx.node.op_type, [ctx.node.input[0]])
