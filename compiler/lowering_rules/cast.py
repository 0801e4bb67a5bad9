from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule
from compiler.onnx_graph.tensor_types import DTYPE_NAMES, elem_type_name


@lowering_rule("Cast")
def lower_cast(ctx: NodeContext) -> KernelCall:
    """Element type conversion; `to` written as a dtype name."""
    ctx.require_inputs(1)
    ctx.require_dtypes(tuple(DTYPE_NAMES.values()))
    to = ctx.attr("to")
    if to is None:
        raise ctx.error("missing required attribute 'to'")
    if to not in DTYPE_NAMES:
        raise ctx.error(f"cannot cast to {elem_type_name(to)}; the emulator supports "
                        f"{', '.join(DTYPE_NAMES.values())}")
    return KernelCall("Cast", [ctx.node.input[0]], {"to": DTYPE_NAMES[to]})
