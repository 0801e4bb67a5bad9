"""KServe v2 tensor codec (plain numpy; no protocol module imported): every v2 datatype through
the JSON and raw forms, the BYTES framing, and the errors that name the tensor. The raw
framing is also checked against tritonclient's own serializer."""
import numpy as np
import pytest
from tritonclient.utils import deserialize_bytes_tensor, serialize_byte_tensor

from serving.model_server import kserve_codec
from serving.model_server.errors import ServingError

SAMPLES = {
    "BOOL": np.array([[True, False, True]]),
    "INT8": np.array([[-128, 0, 127]], np.int8),
    "INT16": np.array([[-32768, 1, 32767]], np.int16),
    "INT32": np.array([[-2**31, 2, 2**31 - 1]], np.int32),
    "INT64": np.array([[-2**63, 3, 2**63 - 1]], np.int64),
    "UINT8": np.array([[0, 1, 255]], np.uint8),
    "UINT16": np.array([[0, 2, 65535]], np.uint16),
    "UINT32": np.array([[0, 3, 2**32 - 1]], np.uint32),
    "UINT64": np.array([[0, 4, 2**64 - 1]], np.uint64),
    "FP16": np.array([[-1.5, 0.0, 65504.0]], np.float16),
    "FP32": np.array([[-1.25, 3.0e38, 1e-38]], np.float32),
    "FP64": np.array([[-1.25, 1e308, 5e-324]], np.float64),
    "BYTES": np.array([[b"", b"abc", "\u00e9\u4e2d".encode()]], dtype=object),
}


@pytest.mark.parametrize("datatype", list(SAMPLES))
def test_every_datatype_round_trips_json_and_raw(datatype):
    array = SAMPLES[datatype]
    assert kserve_codec.datatype_of(array.dtype) == datatype
    raw = kserve_codec.to_raw(array)
    decoded = kserve_codec.from_raw(raw, datatype, list(array.shape), "t")
    assert decoded.shape == array.shape and decoded.dtype == array.dtype
    assert decoded.tolist() == array.tolist()
    data = kserve_codec.to_json(array)
    if datatype == "BYTES":   # JSON carries BYTES as UTF-8 text
        assert data == [v.decode() for v in array.reshape(-1)]
    decoded = kserve_codec.from_json(data, datatype, list(array.shape), "t")
    assert decoded.tolist() == array.tolist() and decoded.dtype == array.dtype


def test_raw_decoding_does_not_copy():
    raw = np.arange(6, dtype=np.float32).tobytes()
    array = kserve_codec.from_raw(raw, "FP32", [2, 3], "x")
    assert not array.flags.owndata and array.base is not None
    np.testing.assert_array_equal(array, np.arange(6, dtype=np.float32).reshape(2, 3))


def test_bytes_framing_matches_tritonclient():
    array = SAMPLES["BYTES"]
    assert kserve_codec.to_raw(array) == serialize_byte_tensor(array).item()
    theirs = serialize_byte_tensor(array).item()
    assert list(kserve_codec.from_raw(theirs, "BYTES", [1, 3], "t").reshape(-1)) == list(
        deserialize_bytes_tensor(theirs))


def test_nested_json_data_is_row_major():
    decoded = kserve_codec.from_json([[1, 2, 3], [4, 5, 6]], "INT32", [3, 2], "x")
    np.testing.assert_array_equal(decoded, np.arange(1, 7).reshape(3, 2))


@pytest.mark.parametrize("call, needle", [
    (lambda: kserve_codec.from_raw(b"\0" * 7, "FP32", [2], "x"), "input 'x': 7 bytes"),
    (lambda: kserve_codec.from_raw(b"\5\0\0\0ab", "BYTES", [1], "s"), "claims 5 bytes"),
    (lambda: kserve_codec.from_raw(b"\1\0\0\0ab", "BYTES", [1], "s"), "1 bytes left"),
    (lambda: kserve_codec.from_json([1, 2], "FP32", [3], "x"), "2 values"),
    (lambda: kserve_codec.from_json([1.5], "INT32", [1], "i"), "non-integer"),
    (lambda: kserve_codec.from_json([300], "UINT8", [1], "u"), "do not fit UINT8"),
    (lambda: kserve_codec.from_json([1], "BOOL", [1], "b"), "true/false"),
    (lambda: kserve_codec.from_json(["a"], "FP32", [1], "x"), "not a number"),
    (lambda: kserve_codec.from_json([1], "BYTES", [1], "s"), "must be a string"),
    (lambda: kserve_codec.from_json([1], "BF16", [1], "x"), "unsupported datatype 'BF16'"),
    (lambda: kserve_codec.from_json([1], "FP32", [-1], "x"), "non-negative"),
])
def test_bad_tensors_name_the_problem(call, needle):
    with pytest.raises(ServingError) as info:
        call()
    assert info.value.code.name == "INVALID_ARGUMENT" and needle in info.value.message
