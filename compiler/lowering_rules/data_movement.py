"""Pad, Slice, Tile, Expand, Split, Gather, GatherElements: shape-dependent operands (pads,
starts/ends/axes/steps, repeats, shape, split) must be constants and become attributes."""
from typing import List

import numpy as np

from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule


def _ints(values) -> List[int]:
    return [int(v) for v in np.asarray(values).reshape(-1)]


def _operand(ctx: NodeContext, index: int, attr: str = None, default=None):
    """An operand given as a constant input (newer opsets) or as an attribute (older ones)."""
    if ctx.has_input(index):
        return ctx.constant_input(index)
    value = ctx.attr(attr) if attr else None
    return default if value is None else value


@lowering_rule("Pad")
def lower_pad(ctx: NodeContext) -> KernelCall:
    """pads (input since opset 11, optional axes since 18) become one begin/end pair per axis."""
    rank = ctx.rank(0)
    mode = ctx.attr("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if ctx.opset < 11:
        pads, value = _ints(ctx.attr("pads", [])), float(ctx.attr("value", 0.0))
        axes = list(range(rank))
    else:
        pads = _ints(ctx.constant_input(1)) if ctx.has_input(1) else []
        value = ctx.constant_input(2).reshape(-1)[0].item() if ctx.has_input(2) else 0
        axes = [ctx.normalize_axis(a, rank, "pad axis") for a in _ints(ctx.constant_input(3))] if ctx.has_input(3) \
            else list(range(rank))
    if len(pads) != 2 * len(axes):
        raise ctx.error(f"pads {pads} must hold a begin and an end for each of the axes {axes}")
    full = [0] * (2 * rank)
    for i, a in enumerate(axes):
        full[a], full[rank + a] = pads[i], pads[len(axes) + i]
    if not np.isfinite(value):
        raise ctx.error(f"constant_value {value} is not finite; the emulator's Pad fills with finite values only")
    return KernelCall("Pad", [ctx.node.input[0]], {"mode": mode, "pads": full, "value": float(value)})


@lowering_rule("Slice")
def lower_slice(ctx: NodeContext) -> KernelCall:
    """starts/ends/axes/steps become a clamped start and a step per axis (numpy slicing rules,
    negative steps included); the output shape gives the counts."""
    shape = ctx.input_type(0).shape
    rank = len(shape)
    if ctx.opset < 10:
        starts, ends = _ints(ctx.attr("starts", [])), _ints(ctx.attr("ends", []))
        axes = _ints(ctx.attr("axes", list(range(len(starts)))))
        steps = [1] * len(starts)
    else:
        starts, ends = _ints(ctx.constant_input(1)), _ints(ctx.constant_input(2))
        axes = _ints(ctx.constant_input(3)) if ctx.has_input(3) else list(range(len(starts)))
        steps = _ints(ctx.constant_input(4)) if ctx.has_input(4) else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ctx.error(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} must have the same length")
    full_starts, full_steps = [0] * rank, [1] * rank
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis = ctx.normalize_axis(axis, rank)
        if step == 0:
            raise ctx.error(f"step 0 on axis {axis}")
        # Python's slice.indices clamps exactly as ONNX specifies, for both signs of step.
        first, _, _ = slice(start, end, step).indices(shape[axis])
        full_starts[axis], full_steps[axis] = first, step
    return KernelCall("Slice", [ctx.node.input[0]], {"starts": full_starts, "steps": full_steps})


@lowering_rule("Tile")
def lower_tile(ctx: NodeContext) -> KernelCall:
    """Repeats come from the (static) output shape."""
    ctx.require_inputs(2)
    ctx.constant_input(1)
    return KernelCall("Tile", [ctx.node.input[0]])


@lowering_rule("Expand")
def lower_expand(ctx: NodeContext) -> KernelCall:
    """Broadcast to the (static) output shape."""
    ctx.require_inputs(2)
    ctx.constant_input(1)
    return KernelCall("Expand", [ctx.node.input[0]])


@lowering_rule("Split")
def lower_split(ctx: NodeContext) -> KernelCall:
    """The pieces' sizes are the outputs' static shapes; only the axis is passed."""
    if ctx.has_input(1):
        ctx.constant_input(1)
    return KernelCall("Split", [ctx.node.input[0]],
                      {"axis": ctx.normalize_axis(int(ctx.attr("axis", 0)), ctx.rank(0))})


@lowering_rule("Gather", "GatherElements")
def lower_gather(ctx: NodeContext) -> KernelCall:
    """Indices are read at run time (int32 or int64)."""
    ctx.require_inputs(2)
    ctx.require_dtypes(("int32", "int64"), [1])
    return KernelCall(ctx.node.op_type, list(ctx.node.input),
                      {"axis": ctx.normalize_axis(int(ctx.attr("axis", 0)), ctx.rank(0))})
