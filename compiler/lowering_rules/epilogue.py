"""The epilogue attributes of the internal ops that end in bias + sum + activation (FusedConv,
FusedGemm, FusedMatMul, NchwcConv): `activation`, `activation_params` (Clip's absent bounds
clamped to ±FLT_MAX) and the 0/1 flags `has_bias` / `has_sum` saying which of the optional
inputs 2 and 3 follow the two operands (only present inputs are passed to the kernel)."""
from typing import Sequence

import numpy as np

from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.matmul import FLOATS
from compiler.onnx_graph.activations import ACTIVATIONS

_FLT_MAX = float(np.finfo(np.float32).max)


def with_epilogue(ctx: NodeContext, base: KernelCall, op: str, dtypes: Sequence[str] = FLOATS) -> KernelCall:
    """Kernel `op` on the node's present inputs, with `base`'s attrs plus the epilogue's."""
    ctx.require_dtypes(dtypes)
    activation = ctx.attr("activation", b"")
    activation = activation.decode() if isinstance(activation, bytes) else activation
    # JSON has no infinities: an absent Clip bound (±inf) becomes ±FLT_MAX, the same clamp on
    # every finite float32.
    params = [float(np.clip(p, -_FLT_MAX, _FLT_MAX)) for p in ctx.attr("activation_params", [])]
    if activation not in ACTIVATIONS:
        raise ctx.error(f"unknown activation '{activation}' (known: {', '.join(a for a in ACTIVATIONS if a)})")
    if len(params) != len(ACTIVATIONS[activation].params):
        raise ctx.error(f"activation '{activation}' takes activation_params {list(ACTIVATIONS[activation].params)}, "
                        f"got {params}")
    has_bias, has_sum = ctx.has_input(2), ctx.has_input(3)
    inputs = [ctx.node.input[0], ctx.node.input[1]] + [ctx.node.input[i] for i in (2, 3) if ctx.has_input(i)]
    if has_sum and ctx.input_type(3).shape != ctx.output_type(0).shape:
        raise ctx.error(f"sum input '{ctx.node.input[3]}' has shape {ctx.input_type(3).shape_text()}, the output "
                        f"{ctx.output_type(0).shape_text()}: the epilogue adds it elementwise")
    attrs = dict(base.attrs, activation=activation, activation_params=params, has_bias=int(has_bias),
                 has_sum=int(has_sum))
    return KernelCall(op, inputs, attrs)
