"""NchwcInvertedResidual (compiler/onnx_graph/inverted_residual.py; written by to_inverted_residual):
expand 1x1 -> depthwise [-> project 1x1 [+ X]] on the blocked layout in one step, float32 or float16.
The rule checks the shapes and activations the kernel assumes, so a malformed node fails here,
naming it, rather than in the runtime."""
import numpy as np

from compiler.lowering_rules.epilogue import FLOATS
from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule
from compiler.lowering_rules.window_attrs import window_attrs
from compiler.onnx_graph import inverted_residual
from compiler.onnx_graph.activations import ACTIVATIONS
from compiler.onnx_graph.internal_ops import DOMAIN

_FLT_MAX = float(np.finfo(np.float32).max)


def _stage_activation(ctx: NodeContext, stage: str) -> dict:
    name = ctx.attr(f"{stage}_activation", b"")
    name = name.decode() if isinstance(name, bytes) else name
    if name not in inverted_residual.ACTIVATIONS:
        raise ctx.error(f"{stage}_activation '{name}' is not one the fused block applies "
                        f"(none, {', '.join(a for a in inverted_residual.ACTIVATIONS if a)})")
    # JSON has no infinities: an absent Clip bound (±inf) becomes ±FLT_MAX (as the epilogue's).
    params = [float(np.clip(p, -_FLT_MAX, _FLT_MAX)) for p in ctx.attr(f"{stage}_activation_params", [])]
    if len(params) != len(ACTIVATIONS[name].params):
        raise ctx.error(f"{stage}_activation '{name}' takes activation_params {list(ACTIVATIONS[name].params)}, "
                        f"got {params}")
    return {f"{stage}_activation": name, f"{stage}_activation_params": params}


@lowering_rule(f"{DOMAIN}::NchwcInvertedResidual")
def lower_nchwc_inverted_residual(ctx: NodeContext) -> KernelCall:
    """The fused block on a blocked X with blocked weights and three biases (two without the project)."""
    ctx.require_inputs(5, 7)
    n_inputs = len(ctx.node.input)
    if n_inputs == 6 or (n_inputs == 7 and not (ctx.node.input[5] and ctx.node.input[6])):
        raise ctx.error(f"inputs {list(ctx.node.input)}: expected X, We, Be, Wd, Bd and, for the project stage, "
                        f"both Wp and Bp")
    project = n_inputs == 7
    ctx.require_dtypes(FLOATS)
    x, we, wd = (list(ctx.input_type(i).shape) for i in (0, 1, 3))
    wp = list(ctx.input_type(5).shape) if project else None
    residual = int(ctx.attr("residual", 0))
    if residual not in (0, 1):
        raise ctx.error(f"attribute 'residual' is {residual}, expected 0 or 1")
    if len(x) != 5 or len(wd) != 4:
        raise ctx.error(f"X {ctx.input_type(0).shape_text()} and Wd {ctx.input_type(3).shape_text()} must be blocked "
                        f"[N, C/8, H, W, 8] and [Cexp/8, KH, KW, 8]")
    attrs = window_attrs(ctx, wd[1:3], spatial=x[2:4])
    if attrs["dilations"] != [1, 1]:
        raise ctx.error(f"depthwise dilations {attrs['dilations']}: the fused block takes 1x1 only")
    try:
        expected = inverted_residual.output_shape(x, we, wd, wp, attrs["strides"], attrs["pads"], bool(residual))
    except ValueError as e:
        raise ctx.error(str(e)) from None
    mid, out = we[0] * we[-1], expected[1] * 8
    biases = ((2, "expand bias Be", mid), (4, "depthwise bias Bd", mid)) + (((6, "project bias Bp", out),) if project else ())
    for i, what, size in biases:
        if list(ctx.input_type(i).shape) != [size]:
            raise ctx.error(f"{what} '{ctx.node.input[i]}' has shape {ctx.input_type(i).shape_text()}, "
                            f"expected [{size}]")
    if tuple(ctx.output_type(0).shape) != tuple(expected):
        raise ctx.error(f"output '{ctx.node.output[0]}' has shape {ctx.output_type(0).shape_text()}, expected "
                        f"{list(expected)}")
    attrs["residual"] = residual
    for stage in inverted_residual.STAGES if project else inverted_residual.STAGES[:2]:
        attrs.update(_stage_activation(ctx, stage))
    return KernelCall("NchwcInvertedResidual", list(ctx.node.input), attrs)
