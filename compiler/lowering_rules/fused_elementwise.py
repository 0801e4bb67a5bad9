"""The internal op FusedElementwise (compiler/kernel_fusion/passes/fuse_elementwise_chain.py): the
program text goes to the kernel as it is (the runtime parses and checks it at prepare); the
rule checks the operand shapes the kernel reads."""
from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule
from compiler.lowering_rules.matmul import FLOATS
from compiler.onnx_graph.internal_ops import DOMAIN


@lowering_rule(f"{DOMAIN}::FusedElementwise")
def lower_fused_elementwise(ctx: NodeContext) -> KernelCall:
    """A chain of elementwise ops in one loop over full / per-last-axis / scalar operands."""
    ctx.require_inputs(1, 64)
    ctx.require_dtypes(FLOATS)
    program = ctx.attr("program", b"")
    program = program.decode() if isinstance(program, bytes) else program
    if not program.strip():
        raise ctx.error("FusedElementwise needs a non-empty 'program' attribute")
    out = list(ctx.output_type(0).shape)
    for i, name in enumerate(ctx.node.input):
        shape = list(ctx.input_type(i).shape)
        row_vector = bool(out) and len(shape) <= len(out) and shape[-1:] == out[-1:] and all(d == 1 for d in shape[:-1])
        scalar = len(shape) <= len(out) and all(d == 1 for d in shape)
        if shape != out and not row_vector and not scalar:
            raise ctx.error(f"input {i} '{name}' has shape {ctx.input_type(i).shape_text()}; FusedElementwise reads "
                            f"inputs of the output's shape {ctx.output_type(0).shape_text()}, [N] vectors along the "
                            f"last axis or scalars")
    return KernelCall("FusedElementwise", list(ctx.node.input), {"program": program})
