"""Explicit window attributes for Conv, ConvTranspose and the pools: kernel_shape, strides,
dilations and pads (begins then ends) with auto_pad resolved, as the kernels expect
(docs/popef.md §3; the resolution itself is compiler/onnx_graph/spatial_window.py)."""
from typing import Dict, List, Optional, Sequence

from compiler.lowering_rules.node_context import NodeContext
from compiler.onnx_graph.spatial_window import resolve_window


def window_attrs(ctx: NodeContext, kernel: Sequence[int],
                 spatial: Optional[Sequence[int]] = None) -> Dict[str, List[int]]:
    """For a node whose input 0 is [N, C, spatial...] and whose window is `kernel`; `spatial`
    gives the spatial dims of an input laid out otherwise (the blocked [N, C/8, H, W, 8])."""
    if spatial is None:
        x = ctx.input_type(0).shape
        if len(x) - 2 < 1 or len(x) - 2 > 3:
            raise ctx.error(f"input {ctx.input_type(0)} must be [N, C, spatial...] with 1 to 3 spatial dims")
        spatial = x[2:]
    try:
        return resolve_window(spatial, kernel, ctx.attr)
    except ValueError as e:
        raise ctx.error(str(e)) from None
