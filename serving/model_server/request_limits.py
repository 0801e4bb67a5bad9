"""Bounds a hostile request cannot exceed, checked before anything is allocated for it:
JSON nesting depth, and the decoded size of one tensor (a shape may promise more elements
than the request carries: TensorProto typed fields repeat their last value, KServe shapes
are taken at their word until the data is counted).

The decoded-tensor bound is process-wide (set once at start-up from
--max_decoded_tensor_bytes), like TF Serving's process-wide flags.
"""
import re

import numpy as np

from serving.model_server.errors import invalid_argument

INT32_MAX = 2 ** 31 - 1
INT64_MAX = 2 ** 63 - 1
# Deeper than any tensor (TensorFlow's largest rank is 254) plus the objects around it, and
# well inside Python's recursion limit, which the JSON parser would otherwise hit (a 500).
MAX_JSON_DEPTH = 256
_limits = {"max_tensor_bytes": INT32_MAX}

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


def set_max_decoded_tensor_bytes(limit: int) -> None:
    _limits["max_tensor_bytes"] = limit


def max_decoded_tensor_bytes() -> int:
    return _limits["max_tensor_bytes"]


def check_json_depth(raw: bytes) -> None:
    """INVALID_ARGUMENT if the JSON text nests arrays/objects deeper than MAX_JSON_DEPTH.
    Counting every bracket is an upper bound on the depth, so most bodies pass on one
    C-speed count; only bodies with many brackets get the exact (string-aware) scan."""
    if raw.count(b"[") + raw.count(b"{") <= MAX_JSON_DEPTH:
        return
    text = bytes(raw)
    if b'"' in text:
        text = _STRING.sub(b"", text)
    brackets = np.frombuffer(text.translate(None, _NOT_BRACKETS), dtype=np.uint8)
    steps = np.where((brackets == ord("[")) | (brackets == ord("{")), 1, -1)
    depth = int(np.cumsum(steps).max()) if steps.size else 0
    if depth > MAX_JSON_DEPTH:
        raise invalid_argument(f"JSON nesting depth {depth} exceeds the limit of "
                               f"{MAX_JSON_DEPTH} nested arrays/objects")


def element_count(shape, tensor: str, itemsize: int = 1) -> int:
    """The element count of `shape`; INVALID_ARGUMENT if its non-zero dimensions times the
    element size multiply past 2^63-1 (TensorFlow's TensorShape bound, and numpy's: it cannot
    even shape an empty array so)."""
    count = 1
    spread = max(itemsize, 1)
    for d in shape:
        count *= int(d)
        spread *= max(int(d), 1)
    if spread > INT64_MAX:
        raise invalid_argument(f"input '{tensor}': shape {list(shape)} is too large (its "
                               "dimensions multiply past 2^63-1)")
    return count


def check_decoded_size(shape, itemsize: int, tensor: str) -> int:
    """The element count of `shape`; INVALID_ARGUMENT naming the tensor if decoding it would
    take more than --max_decoded_tensor_bytes (object elements count 8 bytes each)."""
    count = element_count(shape, tensor, itemsize)
    size = count * max(itemsize, 1)
    limit = _limits["max_tensor_bytes"]
    if size > limit:
        raise invalid_argument(f"input '{tensor}': shape {list(shape)} would decode to {size} "
                               f"bytes, more than the limit of {limit} "
                               "(--max_decoded_tensor_bytes)")
    return count
