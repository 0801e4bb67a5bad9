"""TensorProto <-> numpy, the one conversion every protocol path goes through.

Written with numpy directly because `tf.make_ndarray` / `tf.make_tensor_proto` cost tens of
microseconds of Python per tensor, a visible share of a sub-millisecond request.

Decoding follows TensorFlow's `Tensor::FromProto` (what TF Serving runs on every input):
- a non-empty `tensor_content` holds the little-endian bytes of every element and must have
  exactly `num_elements * itemsize` bytes;
- otherwise the dtype's typed field holds the values: none means all zeros (empty strings),
  fewer than the shape needs repeats the last one, more are cut at the shape's size (the
  REST and Python clients never send those, TF accepts them); 8/16-bit integers travel in
  `int_val` and are cast from int32 like C++ does;
- float16 and bfloat16 travel in `half_val` as 16-bit patterns in int32 slots; complex
  numbers as (real, imag) pairs in `scomplex_val` / `dcomplex_val`;
- DT_STRING uses `string_val` only (bytes elements in an object array).
Encoding writes `tensor_content` for every fixed-size dtype (TF Serving's
`AsProtoTensorContent` serialization: one copy, no per-element Python) and `string_val`
for strings, which have no `tensor_content` form in a PredictResponse.
"""
import numpy as np

from tensorflow.core.framework import tensor_pb2, types_pb2

from serving.model_server.request_limits import check_decoded_size

_ENUM = types_pb2.DataType


def _bfloat16():
    import ml_dtypes   # TensorFlow's own numpy bfloat16 (a TensorFlow dependency)
    return np.dtype(ml_dtypes.bfloat16)


# DataType enum -> (numpy dtype, typed field that carries its values).
_DTYPES = {
    _ENUM.DT_FLOAT: (np.dtype(np.float32), "float_val"),
    _ENUM.DT_DOUBLE: (np.dtype(np.float64), "double_val"),
    _ENUM.DT_INT32: (np.dtype(np.int32), "int_val"),
    _ENUM.DT_INT16: (np.dtype(np.int16), "int_val"),
    _ENUM.DT_INT8: (np.dtype(np.int8), "int_val"),
    _ENUM.DT_UINT8: (np.dtype(np.uint8), "int_val"),
    _ENUM.DT_UINT16: (np.dtype(np.uint16), "int_val"),
    _ENUM.DT_INT64: (np.dtype(np.int64), "int64_val"),
    _ENUM.DT_UINT32: (np.dtype(np.uint32), "uint32_val"),
    _ENUM.DT_UINT64: (np.dtype(np.uint64), "uint64_val"),
    _ENUM.DT_BOOL: (np.dtype(np.bool_), "bool_val"),
    _ENUM.DT_HALF: (np.dtype(np.float16), "half_val"),
    _ENUM.DT_COMPLEX64: (np.dtype(np.complex64), "scomplex_val"),
    _ENUM.DT_COMPLEX128: (np.dtype(np.complex128), "dcomplex_val"),
    _ENUM.DT_STRING: (np.dtype(object), "string_val"),
}
_BFLOAT16_FIELD = "half_val"
# numpy dtype -> DataType enum for encoding (object and bytes/str arrays are DT_STRING).
_ENUM_OF = {dtype: enum for enum, (dtype, _) in _DTYPES.items() if dtype != np.dtype(object)}


def _malformed(message):
    from serving.model_server.errors import invalid_argument
    return invalid_argument(f"malformed TensorProto: {message}")


def _shape(proto):
    shape = proto.tensor_shape
    if shape.unknown_rank:
        raise _malformed("a tensor must have a known rank")
    dims = tuple(d.size for d in shape.dim)
    if any(d < 0 for d in dims):
        raise _malformed(f"negative dimension in shape {list(dims)}")
    return dims


def _numpy_dtype(enum):
    if enum == _ENUM.DT_BFLOAT16:
        return _bfloat16(), _BFLOAT16_FIELD
    try:
        return _DTYPES[enum]
    except KeyError:
        name = _ENUM.Name(enum) if enum in _ENUM.values() else str(enum)
        raise _malformed(f"dtype {name} cannot be sent in a request") from None


def to_ndarray(proto, name: str = "") -> np.ndarray:
    """The numpy array a TensorProto holds (a writable copy); INVALID_ARGUMENT if malformed
    or if its shape decodes to more than --max_decoded_tensor_bytes (`name` is the input's
    alias, for the message)."""
    dims = _shape(proto)
    dtype, field = _numpy_dtype(proto.dtype)
    count = check_decoded_size(dims, dtype.itemsize, name)
    content = proto.tensor_content
    if content and proto.dtype == _ENUM.DT_STRING:
        raise _malformed("DT_STRING values must be in string_val, not tensor_content")
    if content:
        expected = count * dtype.itemsize
        if len(content) != expected:
            raise _malformed(f"tensor_content has {len(content)} bytes but shape {list(dims)} "
                             f"of {_ENUM.Name(proto.dtype)} needs {expected}")
        return np.frombuffer(content, dtype=dtype.newbyteorder("<")).astype(dtype).reshape(dims)
    return _from_typed_field(getattr(proto, field), field, dtype, proto.dtype, dims, count)


def _from_typed_field(values, field, dtype, enum, dims, count):
    if enum == _ENUM.DT_STRING:
        flat = np.empty(count, dtype=object)
        if count:
            items = list(values[:count]) or [b""]
            flat[:len(items)] = items
            flat[len(items):] = items[-1] if len(values) else b""
        return flat.reshape(dims)
    if enum in (_ENUM.DT_HALF, _ENUM.DT_BFLOAT16):
        raw = np.array(values, dtype=np.int32).astype(np.uint16).view(dtype)
    elif enum in (_ENUM.DT_COMPLEX64, _ENUM.DT_COMPLEX128):
        pairs = np.array(values, dtype=dtype.type(0).real.dtype)
        if pairs.size % 2:
            raise _malformed(f"{_ENUM.Name(enum)} values come in (real, imag) pairs; got "
                             f"{pairs.size} numbers")
        raw = pairs.view(dtype)
    elif field == "int_val":   # int32 slots cast like C++'s static_cast (300 -> int8 44)
        raw = np.array(values, dtype=np.int32).astype(dtype)
    else:
        raw = np.array(values, dtype=dtype)
    if raw.size == count:
        return raw.reshape(dims)
    flat = np.zeros(count, dtype=dtype)
    if raw.size and count:
        taken = min(raw.size, count)
        flat[:taken] = raw[:taken]
        flat[taken:] = raw[taken - 1]
    return flat.reshape(dims)


def to_tensor_proto(array, into=None) -> tensor_pb2.TensorProto:
    """A TensorProto holding `array` (any array-like; str elements become UTF-8 bytes).
    `into`: an empty TensorProto to fill (e.g. a response's map entry: saves a copy)."""
    array = np.asarray(array)
    proto = tensor_pb2.TensorProto() if into is None else into
    dims = proto.tensor_shape.dim
    for size in array.shape:
        dims.add().size = size
    kind = array.dtype.kind
    if kind in "OSU":
        proto.dtype = _ENUM.DT_STRING
        proto.string_val.extend(_as_bytes(v) for v in array.ravel())
        return proto
    enum = _ENUM_OF.get(array.dtype.newbyteorder("="))
    if enum is None:
        if array.dtype == _bfloat16():
            enum = _ENUM.DT_BFLOAT16
        else:
            raise TypeError(f"cannot put a numpy {array.dtype} array into a TensorProto")
    proto.dtype = enum
    if array.dtype.byteorder == ">":
        array = array.astype(array.dtype.newbyteorder("<"))
    proto.tensor_content = array.tobytes()
    return proto


def _as_bytes(value) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, np.bytes_):
        return bytes(value)
    raise TypeError(f"a string tensor holds a {type(value).__name__} element ({value!r})")
