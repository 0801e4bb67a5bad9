from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule


@lowering_rule("Transpose")
def lower_transpose(ctx: NodeContext) -> KernelCall:
    """Axis permutation; `perm` filled in (reversed axes) when the model omits it."""
    ctx.require_inputs(1)
    rank = ctx.rank(0)
    perm = ctx.attr("perm")
    perm = list(reversed(range(rank))) if perm is None else [int(p) for p in perm]
    if sorted(perm) != list(range(rank)):
        raise ctx.error(f"perm {perm} is not a permutation of the {rank} axes of its input")
    return KernelCall("Transpose", [ctx.node.input[0]], {"perm": perm})
