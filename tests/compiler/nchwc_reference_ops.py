"""Numpy reference implementations of the compiler's internal ops (domain ai.tfpopef) for
onnx.reference.ReferenceEvaluator, written from their specification (docs/popef.md, "Internal
ops") and independent of the compiler's own code, so that a rewritten model can be checked
numerically against onnxruntime on the original one:

    ReferenceEvaluator(model, new_ops=INTERNAL_OPS).run(None, feeds)

ToNchwc, FromNchwc, NchwcConv (the four variants), NchwcWinogradConv, NchwcInvertedResidual, NchwcMaxPool,
NchwcAveragePool, ChannelsLastDepthwiseConv, FusedConv and FusedElementwise.
Everything computes in float64; the blocked ops return their input's type (float32 or float16, rounded
once as the kernels do), the others float32."""
import math

import numpy as np
from onnx.reference.op_run import OpRun

DOMAIN = "ai.tfpopef"
BLOCK = 8


# --- layouts -----------------------------------------------------------------------------------
def to_blocked(x: np.ndarray) -> np.ndarray:
    """[N, C, H, W] -> [N, C/8, H, W, 8], element (n, c, h, w) at [n, c // 8, h, w, c % 8]."""
    n, c, h, w = x.shape
    assert c % BLOCK == 0, x.shape
    return np.ascontiguousarray(x.reshape(n, c // BLOCK, BLOCK, h, w).transpose(0, 1, 3, 4, 2))


def from_blocked(x: np.ndarray) -> np.ndarray:
    n, cb, h, w, b = x.shape
    assert b == BLOCK, x.shape
    return np.ascontiguousarray(x.transpose(0, 1, 4, 2, 3).reshape(n, cb * BLOCK, h, w))


def onnx_weights(w: np.ndarray, x_rank: int, group: int, channels_last: bool = False) -> np.ndarray:
    """NchwcConv's W back to ONNX's [M, C/group, KH, KW], by the contract's index formulas."""
    if channels_last:  # W[og, kh, kw, c, o] = W_onnx[G·og + o, c, kh, kw]
        mg, kh, kw, c, g = w.shape
        return w.transpose(0, 4, 3, 1, 2).reshape(mg * g, c, kh, kw)
    if x_rank == 4:  # plain input: W[og, c, kh, kw, o] = W_onnx[G·og + o, c, kh, kw], G = 8 or 16
        mg, c, kh, kw, g = w.shape
        return w.transpose(0, 4, 1, 2, 3).reshape(mg * g, c, kh, kw)
    if group == 1:  # W[og, ib, kh, kw, i, o] = W_onnx[G·og + o, 8ib + i, kh, kw]
        mg, cb, kh, kw, _, g = w.shape
        return w.transpose(0, 5, 1, 4, 2, 3).reshape(mg * g, cb * BLOCK, kh, kw)
    cb, kh, kw, _ = w.shape  # depthwise: W[cb, kh, kw, l] = W_onnx[8cb + l, 0, kh, kw]
    return w.transpose(0, 3, 1, 2).reshape(cb * BLOCK, 1, kh, kw)


# --- plain NCHW kernels --------------------------------------------------------------------------
def conv2d(x, w, strides, dilations, pads, group):
    """ONNX Conv (NCHW, explicit pads [top, left, bottom, right]) in float64."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    (sh, sw), (dh, dw) = strides, dilations
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (h + pads[0] + pads[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pads[1] + pads[3] - dw * (kw - 1) - 1) // sw + 1
    xg = xp.reshape(n, group, cg, xp.shape[2], xp.shape[3])
    wg = w.reshape(group, m // group, cg, kh, kw)
    y = np.zeros((n, group, m // group, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xg[:, :, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]
            y += np.einsum("ngchw,gmc->ngmhw", patch, wg[:, :, :, i, j])
    return y.reshape(n, m, oh, ow)


def pool_output_size(spatial, kernel_shape, strides, dilations, pads, ceil_mode):
    """ONNX pooling's output (H, W): ceil_mode drops a last window that would start in the end
    padding."""
    out = []
    for i, size in enumerate(spatial):
        k, s, d = kernel_shape[i], strides[i], dilations[i]
        span = size + pads[i] + pads[i + 2] - d * (k - 1) - 1
        o = (-(-span // s) if ceil_mode else span // s) + 1
        if ceil_mode and (o - 1) * s >= size + pads[i]:
            o -= 1
        out.append(o)
    return tuple(out)


def max_pool2d(x, kernel_shape, strides, dilations, pads, ceil_mode, pad_value=-np.inf):
    """ONNX MaxPool (one output): padding never wins, ceil_mode drops a last window that would
    start in the end padding. pad_value 0: the pads hold zeros (NchwcMaxPool's zero_pads)."""
    n, c, h, w = x.shape
    oh, ow = pool_output_size((h, w), kernel_shape, strides, dilations, pads, ceil_mode)
    (kh, kw), (sh, sw), (dh, dw) = kernel_shape, strides, dilations
    bottom = max(pads[2], (oh - 1) * sh + dh * (kh - 1) + 1 - h - pads[0])
    right = max(pads[3], (ow - 1) * sw + dw * (kw - 1) + 1 - w - pads[1])
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])),
                constant_values=pad_value)
    xp = np.pad(xp, ((0, 0), (0, 0), (0, bottom - pads[2]), (0, right - pads[3])), constant_values=-np.inf)
    y = np.full((n, c, oh, ow), -np.inf)
    for i in range(kh):
        for j in range(kw):
            y = np.maximum(y, xp[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw])
    return y


def average_pool2d(x, kernel_shape, strides, dilations, pads, ceil_mode, count_include_pad):
    """ONNX AveragePool: each window's mean over its taps inside the input, or with
    count_include_pad the sum over those divided by its taps inside [-pad_begin, size + pad_end);
    output size as max_pool2d's (ceil_mode drops a window that would start in the end padding)."""
    n, c, h, w = x.shape
    sizes = pool_output_size((h, w), kernel_shape, strides, dilations, pads, ceil_mode)
    y = np.zeros((n, c, *sizes))
    for oy in range(sizes[0]):
        for ox in range(sizes[1]):
            taps = []  # per axis: the input positions of the window inside the input / the padded input
            for i, o in enumerate((oy, ox)):
                start = o * strides[i] - pads[i]
                positions = [start + t * dilations[i] for t in range(kernel_shape[i])]
                extent = (h, w)[i]
                taps.append(([p for p in positions if 0 <= p < extent],
                             sum(-pads[i] <= p < extent + pads[i + 2] for p in positions)))
            (rows, padded_rows), (cols, padded_cols) = taps
            total = x[:, :, rows][:, :, :, cols].astype(np.float64).sum(axis=(2, 3))
            count = padded_rows * padded_cols if count_include_pad else len(rows) * len(cols)
            y[:, :, oy, ox] = total / count if count else 0.0
    return y


_erf = np.vectorize(math.erf)


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def apply_activation(y, name, params):
    """The epilogue activations (docs/popef.md: FusedConv's `activation` / `activation_params`)."""
    p = [float(v) for v in (params if params is not None else [])]
    if name in ("", None):
        return y
    if name == "Relu":
        return np.maximum(y, 0.0)
    if name == "Clip":
        return np.minimum(np.maximum(y, p[0]), p[1])
    if name == "LeakyRelu":
        return np.where(y >= 0, y, p[0] * y)
    if name == "Sigmoid":
        return _sigmoid(y)
    if name == "Swish":
        return y * _sigmoid(p[0] * y)
    if name == "HardSigmoid":
        return np.clip(p[0] * y + p[1], 0.0, 1.0)
    if name == "HardSwish":
        return y * np.clip(y / 6.0 + 0.5, 0.0, 1.0)
    if name == "GeluErf":
        return 0.5 * y * (1.0 + _erf(y / math.sqrt(2.0)))
    if name == "GeluTanh":
        return 0.5 * y * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (y + 0.044715 * y ** 3)))
    if name == "Tanh":
        return np.tanh(y)
    raise ValueError(f"unknown activation {name!r}")


def _text(v):
    return v.decode() if isinstance(v, bytes) else (v or "")


def _window(strides, dilations, pads):
    """Absent attributes at ONNX's defaults (2-D)."""
    return list(strides or [1, 1]), list(dilations or [1, 1]), list(pads or [0, 0, 0, 0])


# --- the ops -------------------------------------------------------------------------------------
class ToNchwc(OpRun):
    op_domain = DOMAIN

    def _run(self, x, channels_last=None):
        return (to_blocked(x.transpose(0, 3, 1, 2) if channels_last else x),)


class FromNchwc(OpRun):
    op_domain = DOMAIN

    def _run(self, x, channels_last=None):
        y = from_blocked(x)
        return (y.transpose(0, 2, 3, 1) if channels_last else y,)


class NchwcConv(OpRun):
    op_domain = DOMAIN

    def _run(self, x, w, b=None, s=None, scale=None, kernel_shape=None, strides=None, dilations=None, pads=None,
             group=None, activation=None, activation_params=None, channels_last=None):
        group = int(group or 1)
        w_onnx = onnx_weights(w, x.ndim, group, bool(channels_last))
        x_plain = x.transpose(0, 3, 1, 2) if channels_last else x if x.ndim == 4 else from_blocked(x)
        if scale is not None:  # X·S, S [N, C/8, 1, 1, 8]: one factor per image and channel
            x_plain = x_plain.astype(np.float64) * from_blocked(scale.astype(np.float64))
        if kernel_shape is not None:
            assert list(kernel_shape) == list(w_onnx.shape[2:]), (kernel_shape, w_onnx.shape)
        strides, dilations, pads = _window(strides, dilations, pads)
        y = conv2d(x_plain, w_onnx, strides, dilations, pads, group)
        return (_conv_epilogue(y, x.dtype, b, s, activation, activation_params),)


class ChannelsLastDepthwiseConv(OpRun):
    """Depthwise conv of X [N, H, W, C] with NchwcConv's depthwise W [C/8, KH, KW, 8], + B, then
    (layer_norm = 1) LayerNormalization over C with Scale, LnBias and epsilon; Y [N, OH, OW, C]."""
    op_domain = DOMAIN

    def _run(self, x, w, b=None, scale=None, ln_bias=None, kernel_shape=None, strides=None, dilations=None,
             pads=None, layer_norm=None, epsilon=None):
        w_onnx = onnx_weights(w, 5, x.shape[3])
        if kernel_shape is not None:
            assert list(kernel_shape) == list(w_onnx.shape[2:]), (kernel_shape, w_onnx.shape)
        strides, dilations, pads = _window(strides, dilations, pads)
        y = conv2d(x.transpose(0, 3, 1, 2), w_onnx, strides, dilations, pads, x.shape[3]).transpose(0, 2, 3, 1)
        if b is not None:
            y = y + b.astype(np.float64)
        if layer_norm:
            mean = y.mean(axis=-1, keepdims=True)
            var = ((y - mean) ** 2).mean(axis=-1, keepdims=True)
            y = (y - mean) / np.sqrt(var + (1e-5 if epsilon is None else float(epsilon))) * scale.astype(np.float64)
            if ln_bias is not None:
                y = y + ln_bias.astype(np.float64)
        return (np.ascontiguousarray(y).astype(x.dtype),)


# B^T and A^T of Winograd's F(2x2,3x3) and F(4x4,3x3) by output tile side, from the interpolation
# points of docs/popef.md (0, ±1 and 0, -1, 1, 1/2, -2, each with ∞).
_WINOGRAD_BT = {
    2: np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float64),
    4: np.array([[1, -3 / 2, -2, 3 / 2, 1, 0], [0, 1, -5 / 2, 1 / 2, 1, 0], [0, -1, 1 / 2, 5 / 2, 1, 0],
                 [0, -2, -1, 2, 1, 0], [0, 1 / 2, -1, -1 / 2, 1, 0], [0, 1, -3 / 2, -2, 3 / 2, 1]], np.float64),
}
_WINOGRAD_AT = {
    2: np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float64),
    4: np.array([[1, 1, 1, 1, 1, 0], [0, -1, 1, 1 / 2, -2, 0], [0, 1, 1, 1 / 4, 4, 0], [0, -1, 1, 1 / 8, -8, 1]],
                np.float64),
}


class NchwcWinogradConv(OpRun):
    """Each m x m output tile A^T [sum over c of U[:, :, o, c] * (B^T d_c B)] A, d_c the tile's
    (m + 2)² input window of channel c (zeros outside the input), U [(m+2)², M/G, C/8, 8, G]."""
    op_domain = DOMAIN

    def _run(self, x, u, b=None, s=None, pads=None, activation=None, activation_params=None):
        points, groups, cb, _, g = u.shape
        a = int(round(points ** 0.5))
        m = a - 2
        bt, at = _WINOGRAD_BT[m], _WINOGRAD_AT[m]
        uf = u.astype(np.float64).transpose(0, 1, 4, 2, 3).reshape(a, a, groups * g, cb * BLOCK)  # [i, j, M, C]
        xp = from_blocked(x).astype(np.float64)
        top, left, bottom, right = pads
        n, _, h, w = xp.shape
        oh, ow = h + top + bottom - 2, w + left + right - 2
        th, tw = -(-oh // m), -(-ow // m)
        padded = np.zeros((n, xp.shape[1], th * m + 2, tw * m + 2))
        padded[:, :, top:top + h, left:left + w] = xp
        y = np.zeros((n, groups * g, th * m, tw * m))
        for ty in range(th):
            for tx in range(tw):
                d = padded[:, :, ty * m:ty * m + a, tx * m:tx * m + a]
                products = np.einsum("ijoc,ncij->noij", uf, np.einsum("ik,nckl,jl->ncij", bt, d, bt))
                y[:, :, ty * m:(ty + 1) * m, tx * m:(tx + 1) * m] = np.einsum("ik,nokl,jl->noij", at, products, at)
        y = y[:, :, :oh, :ow]
        return (_conv_epilogue(y, x.dtype, b, s, activation, activation_params),)


class NchwcInvertedResidual(OpRun):
    """Expand 1x1 -> depthwise [-> project 1x1 [+ X]], each stage's output rounded to X's type as
    the runtime stores it between stages; without Wp and Bp the depthwise's output."""
    op_domain = DOMAIN

    def _run(self, x, we, be, wd, bd, wp=None, bp=None, kernel_shape=None, strides=None, dilations=None, pads=None,
             residual=None, expand_activation=None, expand_activation_params=None, depthwise_activation=None,
             depthwise_activation_params=None, project_activation=None, project_activation_params=None):
        strides, dilations, pads = _window(strides, dilations, pads)
        stage = from_blocked(x)
        stages = [(we, be, 1, ([1, 1], [1, 1], [0, 0, 0, 0]), expand_activation, expand_activation_params, None),
                  (wd, bd, wd.shape[0] * BLOCK, (strides, dilations, pads), depthwise_activation,
                   depthwise_activation_params, None)]
        if wp is not None:
            stages.append((wp, bp, 1, ([1, 1], [1, 1], [0, 0, 0, 0]), project_activation, project_activation_params,
                           x if residual else None))
        for w, b, group, window, activation, params, s in stages:
            y = conv2d(stage, onnx_weights(w, 5, group), *window, group)
            stage = from_blocked(_conv_epilogue(y, x.dtype, b, s, activation, params))
        return (to_blocked(stage),)


class NchwcMaxPool(OpRun):
    op_domain = DOMAIN

    def _run(self, x, kernel_shape=None, strides=None, dilations=None, pads=None, ceil_mode=None, zero_pads=None):
        strides, dilations, pads = _window(strides, dilations, pads)
        y = max_pool2d(from_blocked(x), list(kernel_shape), strides, dilations, pads, int(ceil_mode or 0),
                       0.0 if zero_pads else -np.inf)
        return (to_blocked(y.astype(x.dtype)),)


class NchwcAveragePool(OpRun):
    op_domain = DOMAIN

    def _run(self, x, kernel_shape=None, strides=None, dilations=None, pads=None, ceil_mode=None,
             count_include_pad=None):
        strides, dilations, pads = _window(strides, dilations, pads)
        y = average_pool2d(from_blocked(x), list(kernel_shape), strides, dilations, pads, int(ceil_mode or 0),
                           int(count_include_pad or 0))
        return (to_blocked(y).astype(x.dtype),)


class FusedConv(OpRun):
    """Conv (explicit pads or auto_pad NOTSET/VALID only) + bias + sum + activation, NCHW."""
    op_domain = DOMAIN

    def _run(self, x, w, b=None, s=None, auto_pad=None, kernel_shape=None, strides=None, dilations=None, pads=None,
             group=None, activation=None, activation_params=None):
        assert _text(auto_pad) in ("", "NOTSET", "VALID"), auto_pad
        strides, dilations, pads = _window(strides, dilations, pads)
        y = conv2d(x, w, strides, dilations, pads, int(group or 1))
        if b is not None:
            y = y + b.astype(np.float64).reshape(1, -1, 1, 1)
        if s is not None:
            y = y + s.astype(np.float64)
        y = apply_activation(y, _text(activation), activation_params)
        return (y.astype(x.dtype),)


_UNARY = {"neg": np.negative, "abs": np.abs, "relu": lambda v: np.maximum(v, 0.0), "sqrt": np.sqrt,
          "reciprocal": np.reciprocal, "exp": np.exp, "log": np.log, "tanh": np.tanh, "sigmoid": _sigmoid,
          "erf": _erf}
_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "max": np.maximum,
           "min": np.minimum, "pow": np.power}


class FusedElementwise(OpRun):
    """The `program` (instructions `opcode operand...` joined by ';'; operands xI, tJ or literals)."""
    op_domain = DOMAIN

    def _run(self, *inputs, program=None):
        xs = [np.asarray(v, np.float64) for v in inputs]
        results = []

        def operand(text):
            if text[0] == "x":
                return xs[int(text[1:])]
            if text[0] == "t":
                return results[int(text[1:])]
            return float(text)

        for instruction in _text(program).split(";"):
            op, *args = instruction.split()
            vals = [operand(a) for a in args]
            with np.errstate(all="ignore"):
                if op in _UNARY:
                    results.append(_UNARY[op](vals[0]))
                elif op in _BINARY:
                    results.append(_BINARY[op](vals[0], vals[1]))
                elif op == "clip":
                    results.append(np.minimum(np.maximum(vals[0], vals[1]), vals[2]))
                else:
                    raise ValueError(f"unknown opcode {op!r}")
        out = np.broadcast_to(results[-1], inputs[0].shape)
        return (out.astype(inputs[0].dtype),)


INTERNAL_OPS = [ToNchwc, FromNchwc, NchwcConv, NchwcWinogradConv, NchwcInvertedResidual, NchwcMaxPool,
                NchwcAveragePool, ChannelsLastDepthwiseConv, FusedConv, FusedElementwise]


def run_internal(model, feeds):
    """The model's outputs with onnx's ReferenceEvaluator and these internal ops."""
    from onnx.reference import ReferenceEvaluator
    return [np.asarray(v) for v in ReferenceEvaluator(model, new_ops=INTERNAL_OPS).run(None, feeds)]


def _conv_epilogue(y, dtype, b, s, activation, activation_params):
    """The NCHWc convolutions' fused epilogue on a float64 NCHW result: bias, Sum, activation, blocked."""
    if b is not None:
        y = y + b.astype(np.float64).reshape(1, -1, 1, 1)
    if s is not None:
        y = y + from_blocked(s).astype(np.float64)
    y = apply_activation(y, _text(activation), activation_params)
    return to_blocked(y.astype(dtype))
