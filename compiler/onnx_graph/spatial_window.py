"""Explicit window attributes of Conv, ConvTranspose and the pools: kernel_shape, strides,
dilations and pads (begins then ends) with auto_pad resolved. Shared by the lowering rules
(compiler/lowering_rules/window_attrs.py) and the passes that rewrite those nodes."""
from typing import Callable, Dict, List, Sequence


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


def resolve_window(spatial: Sequence[int], kernel: Sequence[int], attr: Callable) -> Dict[str, List[int]]:
    """The window of a node over the spatial dims `spatial` (static ints); `attr(name, default)`
    reads the node's attributes (strides, dilations, pads, auto_pad). Raises ValueError saying
    what does not fit (callers add which node it is)."""
    rank = len(spatial)
    kernel = [int(k) for k in kernel]
    if len(kernel) != rank:
        raise ValueError(f"kernel_shape {kernel} does not have one entry per spatial dim of {list(spatial)}")
    strides = [int(s) for s in attr("strides", [1] * rank)]
    dilations = [int(d) for d in attr("dilations", [1] * rank)]
    auto_pad = attr("auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    if len(strides) != rank or len(dilations) != rank:
        raise ValueError(f"strides {strides} or dilations {dilations} do not match {rank} spatial dims")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = same_pads(spatial, kernel, strides, dilations, auto_pad == "SAME_UPPER")
    elif auto_pad == "VALID":
        pads = [0] * (2 * rank)
    elif auto_pad == "NOTSET":
        pads = [int(p) for p in attr("pads", [0] * (2 * rank))]
    else:
        raise ValueError(f"unknown auto_pad '{auto_pad}' (NOTSET, SAME_UPPER, SAME_LOWER, VALID)")
    if len(pads) != 2 * rank:
        raise ValueError(f"strides {strides}, dilations {dilations} or pads {pads} do not match {rank} spatial dims")
    return {"kernel_shape": kernel, "strides": strides, "dilations": dilations, "pads": pads}
