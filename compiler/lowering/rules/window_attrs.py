"""Explicit window attributes for Conv, ConvTranspose and the pools: kernel_shape, strides,
dilations and pads (begins then ends) with auto_pad resolved, as the kernels expect
(docs/popef.md §3)."""
from typing import Dict, List, Sequence

from compiler.lowering.rule_context import NodeContext


def same_pads(in_dims: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
              upper: bool) -> List[int]:
    """SAME_UPPER / SAME_LOWER: output = ceil(in / stride); the odd pixel of padding goes at the
    end (UPPER) or the beginning (LOWER)."""
    begins, ends = [], []
    for i, k, s, d in zip(in_dims, kernel, strides, dilations):
        out = -(-i // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - i)
        small, large = total // 2, total - total // 2
        begins.append(small if upper else large)
        ends.append(large if upper else small)
    return begins + ends


def window_attrs(ctx: NodeContext, kernel: Sequence[int]) -> Dict[str, List[int]]:
    """For a node whose input 0 is [N, C, spatial...] and whose window is `kernel`."""
    x = ctx.input_type(0).shape
    rank = len(x) - 2
    if rank < 1 or rank > 3:
        raise ctx.error(f"input {ctx.input_type(0)} must be [N, C, spatial...] with 1 to 3 spatial dims")
    kernel = [int(k) for k in kernel]
    if len(kernel) != rank:
        raise ctx.error(f"kernel_shape {kernel} does not have one entry per spatial dim of {ctx.input_type(0)}")
    strides = [int(s) for s in ctx.attr("strides", [1] * rank)]
    dilations = [int(d) for d in ctx.attr("dilations", [1] * rank)]
    auto_pad = ctx.attr("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = same_pads(x[2:], kernel, strides, dilations, auto_pad == "SAME_UPPER")
    elif auto_pad == "VALID":
        pads = [0] * (2 * rank)
    elif auto_pad == "NOTSET":
        pads = [int(p) for p in ctx.attr("pads", [0] * (2 * rank))]
    else:
        raise ctx.error(f"unknown auto_pad '{auto_pad}' (NOTSET, SAME_UPPER, SAME_LOWER, VALID)")
    if len(strides) != rank or len(dilations) != rank or len(pads) != 2 * rank:
        raise ctx.error(f"strides {strides}, dilations {dilations} or pads {pads} do not match {rank} spatial dims")
    return {"kernel_shape": kernel, "strides": strides, "dilations": dilations, "pads": pads}
