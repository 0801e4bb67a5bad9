"""Resize (and opset-9 Upsample) as per-axis tap tables (docs/popef.md §3): for every output
index along a changing axis, the source indices and weights, computed here once with the
ONNX reference's definitions (coordinate transformation, nearest rounding, linear and cubic
coefficients, edge clamping, exclude_outside)."""
import math
from typing import List, Tuple

import numpy as np

from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule

FLOATS = ("float32", "float16")
_TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
               "tf_half_pixel_for_nn")


def _text(value, default: str) -> str:
    if value is None:
        return default
    return value.decode() if isinstance(value, bytes) else value


def original_coordinate(mode: str, x: int, scale: float, in_len: int, out_len: int) -> float:
    """Where output index x lies on the input axis (ONNX Resize's coordinate_transformation_mode).
    As in the ONNX reference, align_corners and pytorch_half_pixel use the unrounded resized
    length scale·in_len, half_pixel_symmetric both."""
    resized = scale * in_len
    if mode == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        adjustment = out_len / resized
        center = in_len / 2
        return center * (1 - adjustment) + (x + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if resized != 1 else -0.5
    if mode == "align_corners":
        return x * (in_len - 1) / (resized - 1) if resized != 1 else 0.0
    if mode == "asymmetric":
        return x / scale
    return (x + 0.5) / scale  # tf_half_pixel_for_nn


def _nearest_coeffs(ratio: float, nearest_mode: str) -> List[float]:
    if ratio == 1.0:  # an integer coordinate: the right neighbour is the pixel itself
        return [0.0, 1.0]
    take_right = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
                  "floor": False, "ceil": True}[nearest_mode]
    return [0.0, 1.0] if take_right else [1.0, 0.0]


def _cubic_coeffs(ratio: float, a: float) -> List[float]:
    def far(t):  # 1 < |t| < 2
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a

    def near(t):  # |t| <= 1
        return ((a + 2) * t - (a + 3)) * t * t + 1
    return [far(ratio + 1), near(ratio), near(1 - ratio), far(2 - ratio)]


def axis_taps(mode: str, transform: str, nearest_mode: str, cubic_a: float, exclude_outside: bool,
              scale: float, in_len: int, out_len: int) -> Tuple[int, List[int], List[float]]:
    """(taps per output index, source indices, weights) for one axis."""
    taps, indices, weights = (1 if mode == "nearest" else 2 if mode == "linear" else 4), [], []
    for x in range(out_len):
        coord = original_coordinate(transform, x, scale, in_len, out_len)
        base = math.floor(coord)
        ratio = 1.0 if coord == base else coord - base
        if mode == "nearest":
            coeffs = _nearest_coeffs(ratio, nearest_mode)
        elif mode == "linear":
            coeffs = [1.0 - ratio, ratio]
        else:
            coeffs = _cubic_coeffs(ratio, cubic_a)
        n = len(coeffs)
        # The n neighbours of coord (the reference's choice: nearest first, ties to the left;
        # an integer coordinate counts as the right neighbour of the pair around it).
        first = base - (n // 2 - 1) if coord != base else base - n // 2
        positions = list(range(first, first + n))
        if exclude_outside:
            coeffs = [c if 0 <= p < in_len else 0.0 for c, p in zip(coeffs, positions)]
            total = sum(coeffs)
            coeffs = [c / total for c in coeffs] if total else coeffs
        clamped = [min(max(p, 0), in_len - 1) for p in positions]  # edge padding
        if mode == "nearest":
            indices.append(clamped[coeffs.index(max(coeffs))])
        else:
            indices.extend(clamped)
            weights.extend(coeffs)
    return taps, indices, weights


def _is_identity(taps: int, indices: List[int], weights: List[float], n: int) -> bool:
    """True when output j is exactly input j for every j (the axis can be skipped)."""
    if not weights:
        return indices == list(range(n))
    for j in range(n):
        chunk = list(zip(indices[j * taps:(j + 1) * taps], weights[j * taps:(j + 1) * taps]))
        if any(w != (1.0 if i == j else 0.0) for i, w in chunk) or sum(w for _, w in chunk) != 1.0:
            return False
    return True


@lowering_rule("Resize", "Upsample")
def lower_resize(ctx: NodeContext) -> KernelCall:
    x, y = ctx.input_type(0).shape, ctx.output_type(0).shape
    rank = len(x)
    mode = _text(ctx.attr("mode"), "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        raise ctx.error(f"mode '{mode}' is not supported (nearest, linear, cubic)")
    if mode != "nearest":
        ctx.require_dtypes(FLOATS, [0])
    if int(ctx.attr("antialias", 0)):
        raise ctx.error("antialias=1 is not supported")
    transform = _text(ctx.attr("coordinate_transformation_mode"), "half_pixel")
    if ctx.node.op_type == "Upsample" or ctx.opset < 11:
        transform = "asymmetric"  # Resize-10 and Upsample
    if transform not in _TRANSFORMS:
        raise ctx.error(f"coordinate_transformation_mode '{transform}' is not supported ({', '.join(_TRANSFORMS)})")
    nearest_mode = _text(ctx.attr("nearest_mode"), "round_prefer_floor")
    if ctx.node.op_type == "Upsample" or ctx.opset < 11:
        nearest_mode = "floor"  # Upsample and Resize-10: index = floor(x / scale)
    axes = [ctx.normalize_axis(int(a), rank) for a in ctx.attr("axes", list(range(rank)))]
    scales_index = 1 if ctx.opset < 11 or ctx.node.op_type == "Upsample" else 2
    scales = None
    if ctx.has_input(scales_index):
        values = ctx.constant_input(scales_index).astype(np.float64).reshape(-1)
        if values.size:
            scales = [1.0] * rank
            for a, s in zip(axes, values):
                scales[a] = float(np.float32(s))
    if scales is None:
        if ctx.attr("scales") is not None:  # Upsample-7
            scales = [float(s) for s in ctx.attr("scales")]
        elif ctx.has_input(3):
            ctx.constant_input(3)
            # With sizes the scale is the ratio of the (static) output to the input, uniform over
            # the listed axes under keep_aspect_ratio_policy not_larger / not_smaller.
            policy = _text(ctx.attr("keep_aspect_ratio_policy"), "stretch")
            sizes = [int(s) for s in ctx.constant_input(3).reshape(-1)]
            if policy == "stretch":
                scales = [1.0] * rank
                for a, s in zip(axes, sizes):
                    scales[a] = s / x[a]
            else:
                ratios = [s / x[a] for a, s in zip(axes, sizes)]
                uniform = min(ratios) if policy == "not_larger" else max(ratios)
                scales = [uniform if a in axes else 1.0 for a in range(rank)]
        else:
            raise ctx.error("needs scales or sizes")
    cubic_a = float(ctx.attr("cubic_coeff_a", -0.75))
    exclude_outside = bool(int(ctx.attr("exclude_outside", 0)))
    attrs = {"mode": mode, "axes": [], "taps": [], "indices": []}
    weights: List[float] = []
    for a in range(rank):
        taps, indices, w = axis_taps(mode, transform, nearest_mode, cubic_a, exclude_outside, scales[a], x[a], y[a])
        identity = x[a] == y[a] and _is_identity(taps, indices, w, x[a])
        if identity or x[a] == 0:
            continue
        attrs["axes"].append(a)
        attrs["taps"].append(taps)
        attrs["indices"].extend(indices)
        weights.extend(w)
    if mode != "nearest":
        attrs["weights"] = weights
    return KernelCall("Resize", [ctx.node.input[0]], attrs)
