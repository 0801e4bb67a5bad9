"""KServe v2 tensors <-> numpy: datatype names, the JSON `data` form, raw little-endian bytes
(gRPC `raw_input_contents` / `raw_output_contents` and Triton's binary tensor data extension),
and the BYTES element framing (each element a 4-byte little-endian length, then its bytes).

Plain numpy, bytes and dicts only: no protobuf or protocol module is imported here, so the
codec is unit-tested in a process that also imports tritonclient (whose `inference.*` protobuf
symbols clash with the server's generated ones).

Raw contents are decoded with `np.frombuffer` (no copy: the array views the request's bytes,
read-only, which the runtime accepts as an input).
"""
import struct
from typing import List

import numpy as np

from serving.model_server.errors import invalid_argument
from serving.model_server.request_limits import check_decoded_size

# v2 datatype name <-> numpy dtype. BYTES tensors are numpy object arrays of `bytes`.
DTYPE_OF = {
    "BOOL": np.dtype(np.bool_),
    "INT8": np.dtype(np.int8), "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32), "INT64": np.dtype(np.int64),
    "UINT8": np.dtype(np.uint8), "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32), "UINT64": np.dtype(np.uint64),
    "FP16": np.dtype(np.float16), "FP32": np.dtype(np.float32), "FP64": np.dtype(np.float64),
    "BYTES": np.dtype(object),
}
_NAME_OF = {dtype: name for name, dtype in DTYPE_OF.items() if name != "BYTES"}


def datatype_of(dtype) -> str:
    """The v2 datatype name of a numpy dtype (str, bytes and object arrays are BYTES)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "OSU":
        return "BYTES"
    name = _NAME_OF.get(dtype.newbyteorder("=") if dtype.byteorder == ">" else dtype)
    if name is None:
        raise invalid_argument(f"dtype {dtype} has no KServe v2 datatype")
    return name


def numpy_dtype(datatype: str, tensor: str) -> np.dtype:
    dtype = DTYPE_OF.get(datatype) if isinstance(datatype, str) else None
    if dtype is None:
        raise invalid_argument(
            f"input '{tensor}': unsupported datatype '{datatype}' (supported: "
            f"{', '.join(DTYPE_OF)})")
    return dtype


def check_shape(shape, tensor: str) -> tuple:
    if not isinstance(shape, (list, tuple)) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise invalid_argument(f"input '{tensor}': shape must be a list of non-negative "
                               f"integers, got {shape!r}")
    return tuple(shape)


# ---- raw bytes ---------------------------------------------------------------------------
def from_raw(data, datatype: str, shape, tensor: str) -> np.ndarray:
    """Decodes the raw bytes of one tensor (a view of `data`, no copy, for fixed-size types)."""
    dtype = numpy_dtype(datatype, tensor)
    shape = check_shape(shape, tensor)
    count = check_decoded_size(shape, dtype.itemsize, tensor)
    if datatype == "BYTES":
        return _unframe(data, count, tensor).reshape(shape)
    expected = count * dtype.itemsize
    if len(data) != expected:
        raise invalid_argument(
            f"input '{tensor}': {len(data)} bytes of raw data but shape {list(shape)} of "
            f"{datatype} needs {expected}")
    return np.frombuffer(data, dtype=dtype.newbyteorder("<"), count=count).reshape(shape)


def to_raw(array: np.ndarray) -> bytes:
    """Raw bytes of one output tensor (row-major, little-endian; BYTES framed)."""
    if array.dtype.kind in "OSU":
        return _frame(array)
    array = np.ascontiguousarray(array)
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    return array.tobytes()


def _as_bytes(value) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytearray, memoryview, np.bytes_)):
        return bytes(value)
    return str(value).encode("utf-8")


def _frame(array: np.ndarray) -> bytes:
    parts = []
    for value in array.reshape(-1):
        raw = _as_bytes(value)
        parts.append(struct.pack("<I", len(raw)))
        parts.append(raw)
    return b"".join(parts)


def _unframe(data, count: int, tensor: str) -> np.ndarray:
    view = memoryview(data)
    if count * 4 > len(view):   # refused before the element array is allocated
        raise invalid_argument(f"input '{tensor}': {len(view)} bytes of BYTES data cannot hold "
                               f"the {count} elements its shape declares (each needs at least "
                               "a 4-byte length)")
    values = np.empty(count, dtype=object)
    offset = 0
    for i in range(count):
        if offset + 4 > len(view):
            raise invalid_argument(f"input '{tensor}': BYTES data ends after {i} of {count} "
                                   "elements (each element is a 4-byte length, then its bytes)")
        (length,) = struct.unpack_from("<I", view, offset)
        offset += 4
        if offset + length > len(view):
            raise invalid_argument(f"input '{tensor}': BYTES element {i} claims {length} bytes "
                                   f"but only {len(view) - offset} remain")
        values[i] = bytes(view[offset:offset + length])
        offset += length
    if offset != len(view):
        raise invalid_argument(f"input '{tensor}': {len(view) - offset} bytes left after the "
                               f"{count} BYTES elements its shape holds")
    return values


# ---- JSON --------------------------------------------------------------------------------
def _flatten(data) -> List:
    """Row-major flat list of a (possibly nested) JSON `data` array."""
    if not isinstance(data, list):
        return [data]
    if not any(isinstance(item, list) for item in data):
        return data
    flat = []
    stack = [iter(data)]
    while stack:
        item = next(stack[-1], stack)
        if item is stack:
            stack.pop()
        elif isinstance(item, list):
            stack.append(iter(item))
        else:
            flat.append(item)
    return flat


def from_json(data, datatype: str, shape, tensor: str) -> np.ndarray:
    """Decodes the JSON `data` of one tensor (flat or nested, row-major)."""
    dtype = numpy_dtype(datatype, tensor)
    shape = check_shape(shape, tensor)
    flat = _flatten(data)
    count = check_decoded_size(shape, dtype.itemsize, tensor)
    if len(flat) != count:
        raise invalid_argument(f"input '{tensor}': {len(flat)} values in 'data' but shape "
                               f"{list(shape)} holds {count}")
    if datatype == "BYTES":
        values = np.empty(count, dtype=object)
        for i, value in enumerate(flat):
            if not isinstance(value, str):
                raise invalid_argument(f"input '{tensor}': BYTES element {i} must be a "
                                       f"string, got {type(value).__name__}")
            values[i] = value.encode("utf-8")
        return values.reshape(shape)
    if datatype == "BOOL":
        if not all(isinstance(v, bool) for v in flat):
            raise invalid_argument(f"input '{tensor}': BOOL data must hold true/false values")
    elif any(isinstance(v, (bool, str, dict, type(None))) for v in flat):
        bad = next(v for v in flat if isinstance(v, (bool, str, dict, type(None))))
        raise invalid_argument(f"input '{tensor}': {datatype} data holds {bad!r}, not a number")
    elif dtype.kind in "iu" and any(isinstance(v, float) for v in flat):
        raise invalid_argument(f"input '{tensor}': {datatype} data holds a non-integer value")
    try:
        return np.array(flat, dtype=dtype).reshape(shape)
    except (OverflowError, ValueError) as error:
        raise invalid_argument(f"input '{tensor}': values do not fit {datatype}: {error}") \
            from None


def to_json(array: np.ndarray) -> list:
    """The flat row-major JSON `data` of an output (BYTES as UTF-8 strings where they decode)."""
    flat = array.reshape(-1)
    if array.dtype.kind in "OSU":
        return [_as_bytes(v).decode("utf-8", errors="replace") for v in flat]
    return flat.tolist()
