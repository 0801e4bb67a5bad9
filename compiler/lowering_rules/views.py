from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule

# Input index of the shape/axes operand (a constant the kernel never reads: the output shape
# is static), by op and by whether the opset passes it as an input rather than an attribute.
_SHAPE_OPERAND = {"Reshape": lambda opset: 1, "Squeeze": lambda opset: 1 if opset >= 13 else None,
                  "Unsqueeze": lambda opset: 1 if opset >= 13 else None}


@lowering_rule("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")
def lower_view(ctx: NodeContext) -> KernelCall:
    """Views that only change the shape: a `Reshape` kernel (byte copy, or nothing when the
    memory plan puts the output on its input)."""
    node = ctx.node
    if not node.input or not node.input[0]:
        raise ctx.error("missing data input")
    operand = _SHAPE_OPERAND.get(node.op_type, lambda opset: None)(ctx.opset)
    if operand is not None and ctx.has_input(operand):
        ctx.constant_input(operand)
    elif node.op_type == "Reshape" or (node.op_type == "Unsqueeze" and operand is not None):
        raise ctx.error(f"missing the '{'shape' if node.op_type == 'Reshape' else 'axes'}' input")
    src, dst = ctx.input_type(0), ctx.output_type(0)
    if src.numel != dst.numel or src.elem_type != dst.elem_type:
        raise ctx.error(f"output {dst} does not hold the same elements as input {src}")
    return KernelCall("Reshape", [node.input[0]])
