"""The NCHW8c blocked layout (docs/popef.md, "Internal ops"): block size, blocked shapes and
the four NchwcConv variants with their weight layouts. Shared by the internal ops' shape
inference (internal_ops.py), the pass that writes them (to_nchwc_layout) and their lowering.

A blocked tensor is [N, C/8, H, W, 8] (element (n, c, h, w) at [n, c // 8, h, w, c % 8]),
only ever made of a float32 or float16 [N, C, H, W] with C % 8 == 0."""
from typing import Optional, Sequence, Tuple

import numpy as np

BLOCK = 8

# NchwcConv variants, told apart by X's rank, `group` and `channels_last`.
BLOCKED, PLAIN_INPUT, DEPTHWISE = "blocked", "plain_input", "depthwise"
# X [N, H, W, C] read as it is (channels_last = 1): the RGB stem on the network's NHWC input.
CHANNELS_LAST = "channels_last"
# Input channel counts the channels-last variant takes: the runtime's tiles unroll the C
# interleaved lanes, so each count is a tile instantiation; 3 is the RGB stem, and one channel
# is the plain-input layout itself.
CHANNELS_LAST_CHANNELS = (1, 3)


def can_block(shape: Sequence) -> bool:
    """A static [N, C, H, W] shape whose C fills whole blocks."""
    return (len(shape) == 4 and all(isinstance(d, int) and d >= 0 for d in shape)
            and shape[1] % BLOCK == 0)


def blocked_shape(shape: Sequence[int]) -> Tuple[int, ...]:
    n, c, h, w = shape
    return (n, c // BLOCK, h, w, BLOCK)


def plain_shape(shape: Sequence[int]) -> Tuple[int, ...]:
    n, cb, h, w, _ = shape
    return (n, cb * BLOCK, h, w)


def channels_last(shape: Sequence[int]) -> Tuple[int, ...]:
    """[N, C, H, W] -> [N, H, W, C]."""
    n, c, h, w = shape
    return (n, h, w, c)


def channels_first(shape: Sequence[int]) -> Tuple[int, ...]:
    """[N, H, W, C] -> [N, C, H, W]."""
    n, h, w, c = shape
    return (n, c, h, w)


def conv_variant(x_rank: int, group: int, channels_last: bool = False) -> Optional[str]:
    """The variant an NchwcConv with an X of rank `x_rank` is (None: no variant has that X)."""
    if channels_last:
        return CHANNELS_LAST if x_rank == 4 and group == 1 else None
    if x_rank == 5:
        return BLOCKED if group == 1 else DEPTHWISE
    if x_rank == 4 and group == 1:
        return PLAIN_INPUT
    return None


def output_group(m: int) -> int:
    """Output channels per weight group of a regular NchwcConv with M outputs: 16 (a pair of
    blocks, one 16-float vector of the AVX-512 tiles) when M/8 is even, else 8."""
    return 2 * BLOCK if m % (2 * BLOCK) == 0 else BLOCK


def blocked_weight_shape(variant: str, m: int, c: int, kernel: Sequence[int], per_group: int) -> Tuple[int, ...]:
    """W's shape for `variant` of a conv with M outputs, C inputs and window `kernel`, the
    regular variants in groups of `per_group` output channels (8, or 16 when M % 16 == 0)."""
    kh, kw = kernel
    if variant == BLOCKED:
        return (m // per_group, c // BLOCK, kh, kw, BLOCK, per_group)
    if variant == PLAIN_INPUT:
        return (m // per_group, c, kh, kw, per_group)
    if variant == CHANNELS_LAST:
        return (m // per_group, kh, kw, c, per_group)
    return (c // BLOCK, kh, kw, BLOCK)


def conv_dims(variant: str, x_shape: Sequence[int], w_shape: Sequence[int]) -> Tuple[int, int, Tuple[int, int]]:
    """(M, C, kernel) read from the blocked X and W shapes of `variant` (not checked)."""
    if variant == CHANNELS_LAST:
        return w_shape[0] * w_shape[-1], x_shape[3], tuple(w_shape[1:3])
    c = x_shape[1] * BLOCK if len(x_shape) == 5 else x_shape[1]
    if variant == DEPTHWISE:
        return c, c, tuple(w_shape[1:3])
    return w_shape[0] * w_shape[-1], c, tuple(w_shape[2:4])


def block_weights(w: np.ndarray, variant: str) -> np.ndarray:
    """ONNX Conv weights [M, C/group, KH, KW] re-laid out for `variant`, with G = output_group(M):
    blocked     [M/G, C/8, KH, KW, 8(i), G(o)]  W[og, ib, kh, kw, i, o] = w[G·og + o, 8ib + i, kh, kw]
    plain_input [M/G, C, KH, KW, G(o)]          W[og, c, kh, kw, o]     = w[G·og + o, c, kh, kw]
    channels_last [M/G, KH, KW, C, G(o)]        W[og, kh, kw, c, o]     = w[G·og + o, c, kh, kw]
    depthwise   [C/8, KH, KW, 8]                W[cb, kh, kw, l]        = w[8cb + l, 0, kh, kw]"""
    m, c, kh, kw = w.shape
    g = output_group(m)
    if variant == BLOCKED:
        out = w.reshape(m // g, g, c // BLOCK, BLOCK, kh, kw).transpose(0, 2, 4, 5, 3, 1)
    elif variant == PLAIN_INPUT:
        out = w.reshape(m // g, g, c, kh, kw).transpose(0, 2, 3, 4, 1)
    elif variant == CHANNELS_LAST:
        out = w.reshape(m // g, g, c, kh, kw).transpose(0, 3, 4, 2, 1)
    else:
        out = w.reshape(m // BLOCK, BLOCK, kh, kw).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(out)


def conv_output_dims(spatial: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
                     dilations: Sequence[int], pads: Sequence[int]) -> Tuple[int, ...]:
    """OH, OW = (H + top + bottom - dh·(KH-1) - 1) // sh + 1 (same for W)."""
    rank = len(spatial)
    return tuple((i + pads[a] + pads[a + rank] - d * (k - 1) - 1) // s + 1
                 for a, (i, k, s, d) in enumerate(zip(spatial, kernel, strides, dilations)))


_W_LAYOUTS = {BLOCKED: "[M/G, C/8, KH, KW, 8, G]", PLAIN_INPUT: "[M/G, C, KH, KW, G]",
              CHANNELS_LAST: "[M/G, KH, KW, C, G]", DEPTHWISE: "[C/8, KH, KW, 8]"}


def plain_input_to_channels_last(w: np.ndarray) -> np.ndarray:
    """Plain-input weights [M/G, C, KH, KW, G] re-laid out for the channels-last variant
    [M/G, KH, KW, C, G] (the same convolution on X [N, H, W, C])."""
    return np.ascontiguousarray(w.transpose(0, 2, 3, 1, 4))


def conv_geometry(x_shape: Sequence[int], w_shape: Sequence[int], group: int,
                  channels_last: bool = False) -> Tuple[str, int, int, Tuple[int, int]]:
    """(variant, M, C, kernel) of an NchwcConv with these X and W shapes; raises ValueError
    saying what fits no variant (the schema's inference and the lowering rule both check this)."""
    variant = conv_variant(len(x_shape), group, channels_last)
    if channels_last and (variant is None or x_shape[3] not in CHANNELS_LAST_CHANNELS):
        raise ValueError(f"channels_last = 1 with X {list(x_shape)} and group {group}: it takes group 1 and X "
                         f"[N, H, W, C] with C in {CHANNELS_LAST_CHANNELS}")
    if variant is None:
        raise ValueError(f"X {list(x_shape)} with group {group} fits no NchwcConv variant (X [N, C/8, H, W, 8] with "
                         f"group 1 or C, or X [N, C, H, W] with group 1)")
    if len(x_shape) == 5 and x_shape[4] != BLOCK:
        raise ValueError(f"blocked X {list(x_shape)} must end in a block of {BLOCK} channels")
    rank = len(_W_LAYOUTS[variant].split(","))
    if len(w_shape) != rank:
        raise ValueError(f"W {list(w_shape)} must be {_W_LAYOUTS[variant]} (rank {rank}) for the {variant} variant")
    if variant != DEPTHWISE and w_shape[-1] not in (BLOCK, 2 * BLOCK):
        raise ValueError(f"W {list(w_shape)} must be {_W_LAYOUTS[variant]} with G = {BLOCK} or {2 * BLOCK} output "
                         f"channels per group, not {w_shape[-1]}")
    m, c, kernel = conv_dims(variant, x_shape, w_shape)
    if variant == DEPTHWISE and group != c:
        raise ValueError(f"group {group} with a blocked X of {c} channels: only group 1 or a depthwise group == C")
    want = blocked_weight_shape(variant, m, c, kernel, w_shape[-1])
    if tuple(w_shape) != want:
        raise ValueError(f"W {list(w_shape)} must be {_W_LAYOUTS[variant]} = {list(want)} for the {variant} variant "
                         f"with X {list(x_shape)}")
    return variant, m, c, kernel
