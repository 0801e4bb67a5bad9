"""Shape, Size, Range and ConstantOfShape compute values the compiler knows when shapes are
static: constant_folding replaces them by constants. A node still here depends on a value
only known at run time, which a static program cannot size."""
from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule


@lowering_rule("Shape", "Size", "Range", "ConstantOfShape")
def lower_static_value(ctx: NodeContext) -> KernelCall:
    if ctx.node.op_type in ("Shape", "Size"):
        raise ctx.error(f"{ctx.node.op_type} is evaluated at compile time, but input '{ctx.node.input[0]}' has no "
                        f"static shape; set the input shapes (--input_shape) and run constant_folding")
    runtime = [name for name in ctx.node.input if name and name not in ctx.constants]
    raise ctx.error(f"{ctx.node.op_type} is evaluated at compile time, but its input(s) {', '.join(runtime)} are "
                    f"only known at run time, so its result (and its shape) is not static; make them constants "
                    f"(initializers) or run constant_folding")
