from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule

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


SIGNED = ("float32", "float16", "int8", "int16", "int32", "int64")
CLIP_TYPES = ("float32", "float16", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
# Attributes each parametric activation's kernel reads, with ONNX's defaults.
_PARAMS = {
    "LeakyRelu": {"alpha": 0.01},
    "Elu": {"alpha": 1.0},
    "Selu": {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875},
    "HardSigmoid": {"alpha": 0.2, "beta": 0.5},
}


@lowering_rule("Erf", "Exp", "Log", "Sqrt", "Reciprocal", "Softsign", "Softplus", "HardSwish",
               "LeakyRelu", "Elu", "Selu", "HardSigmoid")
def lower_float_math(ctx: NodeContext) -> KernelCall:
    """Elementwise float function; parameters always explicit."""
    ctx.require_inputs(1)
    ctx.require_dtypes(FLOATS)
    attrs = {name: float(ctx.attr(name, default)) for name, default in _PARAMS.get(ctx.node.op_type, {}).items()}
    return KernelCall(ctx.node.op_type, [ctx.node.input[0]], attrs)


@lowering_rule("Gelu")
def lower_gelu(ctx: NodeContext) -> KernelCall:
    """x·Φ(x), exact (erf) or tanh-approximated."""
    ctx.require_inputs(1)
    ctx.require_dtypes(FLOATS)
    approximate = ctx.attr("approximate", b"none")
    approximate = approximate.decode() if isinstance(approximate, bytes) else approximate
    if approximate not in ("none", "tanh"):
        raise ctx.error(f"approximate must be 'none' or 'tanh', got '{approximate}'")
    return KernelCall("Gelu", [ctx.node.input[0]], {"approximate": approximate})


@lowering_rule("Neg", "Abs")
def lower_signed(ctx: NodeContext) -> KernelCall:
    """Float or signed integer; integers wrap like numpy (-MIN == MIN)."""
    ctx.require_inputs(1)
    ctx.require_dtypes(SIGNED)
    return KernelCall(ctx.node.op_type, [ctx.node.input[0]])


@lowering_rule("Clip")
def lower_clip(ctx: NodeContext) -> KernelCall:
    """min/max (attributes before opset 11, optional constant inputs since) become attributes
    in the tensor's dtype; a missing bound is left out (no clipping on that side)."""
    ctx.require_inputs(1, 3)
    ctx.require_dtypes(CLIP_TYPES)
    integer = "int" in ctx.input_type(0).dtype_name
    attrs = {}
    for index, name in ((1, "min"), (2, "max")):
        if ctx.opset < 11:
            value = ctx.attr(name)
        else:
            value = ctx.constant_input(index).reshape(-1)[0].item() if ctx.has_input(index) else None
        if value is not None:
            if not integer and not -3.4e38 < float(value) < 3.4e38:
                continue  # +-inf or beyond float32: the same as no bound
            attrs[name] = int(value) if integer else float(value)
    return KernelCall("Clip", [ctx.node.input[0]], attrs)
