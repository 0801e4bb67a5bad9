"""The internal fused ops (compiler/onnx_graph/internal_ops.py, written by the fusion passes):
the base op's explicit attributes (as its own rule writes them) plus the epilogue's
`activation`, `activation_params`, and the 0/1 flags `has_bias` / `has_sum` saying which of the
optional inputs follow the two operands (only present inputs are passed to the kernel)."""
import numpy as np

from compiler.lowering.rule_context import KernelCall, NodeContext
from compiler.lowering.rule_registry import lowering_rule
from compiler.lowering.rules.conv import lower_conv
from compiler.lowering.rules.gemm import lower_gemm
from compiler.lowering.rules.matmul import FLOATS
from compiler.onnx_graph.internal_ops import ACTIVATIONS, DOMAIN

_FLT_MAX = float(np.finfo(np.float32).max)


def _epilogue(ctx: NodeContext, base: KernelCall, op: str) -> KernelCall:
    ctx.require_dtypes(FLOATS)
    activation = ctx.attr("activation", b"")
    activation = activation.decode() if isinstance(activation, bytes) else activation
    # JSON has no infinities: an absent Clip bound (±inf) becomes ±FLT_MAX, the same clamp on
    # every finite float32.
    params = [float(np.clip(p, -_FLT_MAX, _FLT_MAX)) for p in ctx.attr("activation_params", [])]
    if activation not in ACTIVATIONS:
        raise ctx.error(f"unknown activation '{activation}' (known: {', '.join(a for a in ACTIVATIONS if a)})")
    if len(params) != len(ACTIVATIONS[activation]):
        raise ctx.error(f"activation '{activation}' takes activation_params {list(ACTIVATIONS[activation])}, "
                        f"got {params}")
    has_bias, has_sum = ctx.has_input(2), ctx.has_input(3)
    inputs = [ctx.node.input[0], ctx.node.input[1]] + [ctx.node.input[i] for i in (2, 3) if ctx.has_input(i)]
    if has_sum and ctx.input_type(3).shape != ctx.output_type(0).shape:
        raise ctx.error(f"sum input '{ctx.node.input[3]}' has shape {ctx.input_type(3).shape_text()}, the output "
                        f"{ctx.output_type(0).shape_text()}: the epilogue adds it elementwise")
    attrs = dict(base.attrs, activation=activation, activation_params=params, has_bias=int(has_bias),
                 has_sum=int(has_sum))
    return KernelCall(op, inputs, attrs)


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
    return _epilogue(ctx, lower_conv(_BaseView(ctx, 3)), "FusedConv")


@lowering_rule(f"{DOMAIN}::FusedGemm")
def lower_fused_gemm(ctx: NodeContext) -> KernelCall:
    """Gemm (+ C) + optional sum + activation."""
    ctx.require_inputs(2, 4)
    return _epilogue(ctx, lower_gemm(_BaseView(ctx, 3)), "FusedGemm")


@lowering_rule(f"{DOMAIN}::FusedMatMul")
def lower_fused_matmul(ctx: NodeContext) -> KernelCall:
    """MatMul + bias along the last dim + optional sum + activation."""
    ctx.require_inputs(2, 4)
    if ctx.has_input(2) and list(ctx.input_type(2).shape) != [ctx.output_type(0).shape[-1]]:
        raise ctx.error(f"bias '{ctx.node.input[2]}' has shape {ctx.input_type(2).shape_text()}; FusedMatMul adds "
                        f"a bias of the output's last dim [{ctx.output_type(0).shape[-1]}]")
    return _epilogue(ctx, KernelCall("MatMul", [ctx.node.input[0], ctx.node.input[1]]), "FusedMatMul")
