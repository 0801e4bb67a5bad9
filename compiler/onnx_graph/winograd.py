"""Winograd's F(m x m, 3x3) convolution on the NCHW8c layout (the runtime's NchwcWinogradConv,
docs/popef.md "Internal ops"): its transformed-weight layout and output shape. Shared by the
internal op's shape inference (internal_ops.py), the pass that writes it (to_winograd_conv) and
its lowering.

An m x m output tile is A^T [U ⊙ (B^T d B)] A with U = G g G^T (Lavin & Gray 2015): a² products
per input and output channel (a = m + 2) instead of 9·m². The compiler computes U once, in float64,
so the runtime never transforms weights."""
from typing import Sequence, Tuple

import numpy as np

from compiler.onnx_graph.nchwc import BLOCK

# G of F(2x2,3x3) and F(4x4,3x3), from the interpolation points 0, ±1 (Lavin & Gray's) and
# 0, -1, 1, 1/2, -2 (in float32 about half the rounding error of 0, ±1, ±2), each with ∞:
# row j is (1, p_j, p_j²) / Π_{l≠j} (p_j - p_l), the last (0, 0, 1). The runtime's B^T and A^T
# (nchwc_winograd_transforms.inc) are of the same points.
_G = {
    2: np.array([[1, 0, 0], [1 / 2, 1 / 2, 1 / 2], [1 / 2, -1 / 2, 1 / 2], [0, 0, 1]], dtype=np.float64),
    4: np.array([[1, 0, 0], [-1 / 3, 1 / 3, -1 / 3], [1 / 3, 1 / 3, 1 / 3], [-16 / 15, -8 / 15, -4 / 15],
                 [1 / 15, -2 / 15, 4 / 15], [0, 0, 1]], dtype=np.float64),
}
TILES = tuple(_G)
_POINTS = {m: (m + 2) ** 2 for m in TILES}  # U's first axis tells the tile


def tile_of(points: int) -> int:
    """The output tile side m whose transform has `points` = (m + 2)² products (ValueError if none)."""
    for m, p in _POINTS.items():
        if p == points:
            return m
    raise ValueError(f"transformed weights with {points} points: expected {' or '.join(map(str, _POINTS.values()))} "
                     f"(F(2x2,3x3) or F(4x4,3x3))")


def transform_weights(blocked: np.ndarray, tile: int) -> np.ndarray:
    """NchwcConv's blocked 3x3 weights [M/G, C/8, 3, 3, 8, G] -> U [a², M/G, C/8, 8, G], point a·i + j
    being (G g G^T)[i][j] of each (output, input) channel pair, computed in float64, returned in the
    weights' type except float16, which gives float32: rounded to float16, U adds about 7x the error
    of rounding a float16 Y (docs/benchmarks.md, "float16 activations")."""
    g = _G[tile]
    a = tile + 2
    u = np.einsum("ik,jl,ocklxy->ijocxy", g, g, blocked.astype(np.float64))
    dtype = np.float32 if blocked.dtype == np.float16 else blocked.dtype
    return np.ascontiguousarray(u.reshape((a * a,) + u.shape[2:]).astype(dtype))


def output_shape(x: Sequence[int], u: Sequence[int], pads: Sequence[int]) -> Tuple[int, ...]:
    """Y [N, M/8, H + top + bottom - 2, W + left + right - 2, 8] of X [N, C/8, H, W, 8] and U
    [a², M/G, C/8, 8, G]; ValueError naming what does not fit."""
    if len(x) != 5 or x[4] != BLOCK:
        raise ValueError(f"X {list(x)} is not a blocked tensor [N, C/{BLOCK}, H, W, {BLOCK}]")
    if len(u) != 5 or u[2] != x[1] or u[3] != BLOCK or u[4] not in (BLOCK, 2 * BLOCK):
        raise ValueError(f"U {list(u)} must be [a², M/G, C/8 = {x[1]}, {BLOCK}, G] with G = {BLOCK} or {2 * BLOCK}")
    tile_of(u[0])
    if len(pads) != 4 or min(pads) < 0:
        raise ValueError(f"pads {list(pads)} must be 4 values [top, left, bottom, right] >= 0")
    oh, ow = x[2] + pads[0] + pads[2] - 2, x[3] + pads[1] + pads[3] - 2
    if oh < 1 or ow < 1:
        raise ValueError(f"the 3x3 window leaves an empty output [{oh}, {ow}]")
    return (x[0], u[1] * u[4] // BLOCK, oh, ow, BLOCK)
