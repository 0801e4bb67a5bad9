"""The internal fused ops (compiler/onnx_graph/internal_ops.py, written by the fusion passes):
the base op's explicit attributes (as its own rule writes them) plus the epilogue's
`activation`, `activation_params`, and the 0/1 flags `has_bias` / `has_sum` saying which of the
optional inputs follow the two operands (only present inputs are passed to the kernel):
rules/epilogue.py."""
from compiler.lowering_rules.conv import lower_conv
from compiler.lowering_rules.epilogue import with_epilogue
from compiler.lowering_rules.gemm import lower_gemm
from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule
from compiler.onnx_graph.internal_ops import DOMAIN


class _BaseView(NodeContext):
    """The fused node seen as its base op by the base op's rule: inputs beyond the base op's
    own are hidden (the rules check their input counts)."""

    def __init__(self, ctx: NodeContext, base_inputs: int):
        node = type(ctx.node)()
        node.CopyFrom(ctx.node)
        del node.input[base_inputs:]
        while node.input and node.input[-1] == "":
            node.input.pop()
        super().__init__(node, ctx.opset, ctx._types, ctx.constants, ctx.model_name)


@lowering_rule(f"{DOMAIN}::FusedConv")
def lower_fused_conv(ctx: NodeContext) -> KernelCall:
    """Conv + bias + optional residual sum + activation."""
    ctx.require_inputs(2, 4)
    return with_epilogue(ctx, lower_conv(_BaseView(ctx, 3)), "FusedConv")


@lowering_rule(f"{DOMAIN}::FusedGemm")
def lower_fused_gemm(ctx: NodeContext) -> KernelCall:
    """Gemm (+ C) + optional sum + activation."""
    ctx.require_inputs(2, 4)
    return with_epilogue(ctx, lower_gemm(_BaseView(ctx, 3)), "FusedGemm")


@lowering_rule(f"{DOMAIN}::FusedMatMul")
def lower_fused_matmul(ctx: NodeContext) -> KernelCall:
    """alpha·MatMul + bias along the last dim + optional sum + activation."""
    ctx.require_inputs(2, 4)
    if ctx.has_input(2) and list(ctx.input_type(2).shape) != [ctx.output_type(0).shape[-1]]:
        raise ctx.error(f"bias '{ctx.node.input[2]}' has shape {ctx.input_type(2).shape_text()}; FusedMatMul adds "
                        f"a bias of the output's last dim [{ctx.output_type(0).shape[-1]}]")
    alpha = float(ctx.attr("alpha", 1.0))
    base = KernelCall("MatMul", [ctx.node.input[0], ctx.node.input[1]], {"alpha": alpha} if alpha != 1.0 else {})
    return with_epilogue(ctx, base, "FusedMatMul")
