from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule

FLOATS = ("float32", "float16")


@lowering_rule("BatchNormalization")
def lower_batch_normalization(ctx: NodeContext) -> KernelCall:
    """Inference form only (running mean/var inputs, output Y)."""
    ctx.require_inputs(5)
    ctx.require_dtypes(FLOATS)
    if int(ctx.attr("training_mode", 0)) or len([o for o in ctx.node.output if o]) > 1:
        raise ctx.error("training mode (running statistics outputs) is not supported; export the model for "
                        "inference")
    if ctx.rank(0) < 2:
        raise ctx.error(f"input {ctx.input_type(0)} must be [N, C, ...]")
    return KernelCall("BatchNormalization", list(ctx.node.input), {"epsilon": float(ctx.attr("epsilon", 1e-5))})


@lowering_rule("LayerNormalization")
def lower_layer_normalization(ctx: NodeContext) -> KernelCall:
    """Normalization over dims [axis:]; which optional outputs (Mean, InvStdDev) exist is
    written as flags because the step lists only the outputs that are used."""
    ctx.require_inputs(2, 3)
    ctx.require_dtypes(FLOATS)
    outputs = list(ctx.node.output) + ["", ""]
    inputs = [ctx.node.input[0], ctx.node.input[1]] + ([ctx.node.input[2]] if ctx.has_input(2) else [])
    return KernelCall("LayerNormalization", inputs,
                      {"axis": ctx.normalize_axis(int(ctx.attr("axis", -1)), ctx.rank(0)),
                       "epsilon": float(ctx.attr("epsilon", 1e-5)),
                       "mean_output": int(bool(outputs[1])), "inv_std_dev_output": int(bool(outputs[2]))})
