"""serving.model_server.tensor_codec against TensorFlow's own converters: every dtype a
request can carry, scalars, empty and multi-dimensional shapes, both value encodings
(tensor_content and the typed fields), TF's fill rules for short typed fields, and the errors
malformed protos answer."""
import grpc
import ml_dtypes
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, types_pb2

from serving.model_server.errors import ServingError
from serving.model_server.tensor_codec import to_ndarray, to_tensor_proto

NUMERIC = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8,
           np.uint16, np.uint32, np.uint64, np.complex64, np.complex128, np.bool_,
           ml_dtypes.bfloat16]
SHAPES = [(), (0,), (3,), (2, 3), (1, 0, 4), (2, 1, 3, 2)]


def sample(dtype, shape):
    rng = np.random.default_rng(abs(hash((np.dtype(dtype).name, shape))) % 2**32)
    values = rng.standard_normal(shape) * 50
    if np.dtype(dtype).kind == "c":
        return (values + 1j * rng.standard_normal(shape)).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return values > 0
    if np.dtype(dtype).kind == "u":
        values = np.abs(values)
    return values.astype(dtype)


def assert_same(got, expected):
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got.astype(object) if got.dtype == object else got, expected)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: np.dtype(d).name)
def test_round_trip_and_tensorflow_agree(dtype, shape):
    array = sample(dtype, shape)
    ours = to_tensor_proto(array)
    assert ours.dtype == tf.as_dtype(array.dtype).as_datatype_enum
    assert [d.size for d in ours.tensor_shape.dim] == list(shape)
    assert_same(to_ndarray(ours), array)
    assert_same(tf.make_ndarray(ours), array)                        # TF reads what we write
    assert_same(to_ndarray(tf.make_tensor_proto(array)), array)      # we read what TF writes


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_strings_round_trip_through_string_val(shape):
    count = int(np.prod(shape))
    flat = np.array([f"s{i}\x00é".encode() for i in range(count)] + [b""], dtype=object)[:count]
    array = flat.reshape(shape)
    ours = to_tensor_proto(array)
    assert ours.dtype == types_pb2.DT_STRING and not ours.tensor_content
    assert list(ours.string_val) == list(flat)
    got = to_ndarray(ours)
    assert got.dtype == object and got.shape == shape and list(got.ravel()) == list(flat)
    assert list(to_ndarray(tf.make_tensor_proto(array)).ravel()) == list(flat)
    assert list(tf.make_ndarray(ours).ravel()) == list(flat)


def test_str_elements_are_utf8_encoded():
    proto = to_tensor_proto(np.array(["añb", "c"]))
    assert list(proto.string_val) == ["añb".encode(), b"c"]
    with pytest.raises(TypeError, match="int element"):
        to_tensor_proto(np.array([b"a", 3], dtype=object))


def typed(dtype_enum, shape, **fields):
    proto = tensor_pb2.TensorProto(dtype=dtype_enum, **fields)
    for size in shape:
        proto.tensor_shape.dim.add().size = size
    return proto


# (DataType, typed field, values, numpy dtype) for the typed-field encoding of each dtype
TYPED = [
    (types_pb2.DT_FLOAT, "float_val", [1.5, -2.0, 3.25], np.float32),
    (types_pb2.DT_DOUBLE, "double_val", [1.5, -2.0, 1e300], np.float64),
    (types_pb2.DT_INT32, "int_val", [1, -2, 2**31 - 1], np.int32),
    (types_pb2.DT_INT16, "int_val", [1, -2, 32767], np.int16),
    (types_pb2.DT_INT8, "int_val", [1, -2, 127], np.int8),
    (types_pb2.DT_UINT8, "int_val", [1, 2, 255], np.uint8),
    (types_pb2.DT_UINT16, "int_val", [1, 2, 65535], np.uint16),
    (types_pb2.DT_INT64, "int64_val", [1, -2, 2**62], np.int64),
    (types_pb2.DT_UINT32, "uint32_val", [1, 2, 2**32 - 1], np.uint32),
    (types_pb2.DT_UINT64, "uint64_val", [1, 2, 2**64 - 1], np.uint64),
    (types_pb2.DT_BOOL, "bool_val", [True, False, True], np.bool_),
]


@pytest.mark.parametrize("enum,field,values,dtype", TYPED,
                         ids=[types_pb2.DataType.Name(t[0]) for t in TYPED])
def test_typed_fields_decode_like_tensorflow(enum, field, values, dtype):
    proto = typed(enum, [3], **{field: values})
    assert_same(to_ndarray(proto), np.array(values, dtype=dtype))
    assert_same(to_ndarray(proto), tf.make_ndarray(proto))


def test_half_and_bfloat16_travel_as_bit_patterns_in_half_val():
    half = np.array([1.5, -0.25, 65504], np.float16)
    proto = typed(types_pb2.DT_HALF, [3], half_val=half.view(np.uint16).tolist())
    assert_same(to_ndarray(proto), half)
    bf16 = np.array([1.5, -0.25, 3e38], ml_dtypes.bfloat16)
    proto = typed(types_pb2.DT_BFLOAT16, [3], half_val=bf16.view(np.uint16).tolist())
    assert_same(to_ndarray(proto), bf16)
    assert_same(to_ndarray(proto), tf.make_ndarray(proto))


def test_complex_values_are_real_imag_pairs():
    proto = typed(types_pb2.DT_COMPLEX64, [2], scomplex_val=[1, 2, 3, -4])
    assert_same(to_ndarray(proto), np.array([1 + 2j, 3 - 4j], np.complex64))
    proto = typed(types_pb2.DT_COMPLEX128, [1], dcomplex_val=[0.5, -1])
    assert_same(to_ndarray(proto), np.array([0.5 - 1j], np.complex128))
    with pytest.raises(ServingError, match="pairs"):
        to_ndarray(typed(types_pb2.DT_COMPLEX64, [1], scomplex_val=[1, 2, 3]))


def test_short_typed_fields_follow_tensorflow_fill_rules():
    # Tensor::FromProto: no values -> zeros; fewer -> the last value repeated; more -> cut.
    assert_same(to_ndarray(typed(types_pb2.DT_FLOAT, [2, 2])), np.zeros((2, 2), np.float32))
    assert_same(to_ndarray(typed(types_pb2.DT_INT32, [4], int_val=[7, 8])),
                np.array([7, 8, 8, 8], np.int32))
    assert_same(to_ndarray(typed(types_pb2.DT_FLOAT, [2, 3], float_val=[5.0])),
                tf.make_ndarray(typed(types_pb2.DT_FLOAT, [2, 3], float_val=[5.0])))
    assert_same(to_ndarray(typed(types_pb2.DT_INT64, [2], int64_val=[1, 2, 3])),
                np.array([1, 2], np.int64))
    strings = to_ndarray(typed(types_pb2.DT_STRING, [3], string_val=[b"a"]))
    assert list(strings) == [b"a", b"a", b"a"]
    assert list(to_ndarray(typed(types_pb2.DT_STRING, [2]))) == [b"", b""]
    assert to_ndarray(typed(types_pb2.DT_FLOAT, [0], float_val=[1.0])).shape == (0,)


def test_small_integers_are_cast_from_int32_slots_like_cplusplus():
    assert_same(to_ndarray(typed(types_pb2.DT_INT8, [2], int_val=[300, -129])),
                np.array([44, 127], np.int8))


def test_decoded_arrays_are_writable_copies():
    proto = to_tensor_proto(np.arange(4, dtype=np.float32))
    array = to_ndarray(proto)
    array[0] = 9
    assert to_ndarray(proto)[0] == 0


def test_big_endian_arrays_are_sent_little_endian():
    array = np.arange(3, dtype=">i4")
    proto = to_tensor_proto(array)
    assert proto.dtype == types_pb2.DT_INT32
    assert_same(to_ndarray(proto), np.arange(3, dtype=np.int32))


@pytest.mark.parametrize("proto,message", [
    (typed(types_pb2.DT_FLOAT, [2, 2], tensor_content=b"\0" * 12),
     "tensor_content has 12 bytes but shape [2, 2] of DT_FLOAT needs 16"),
    (typed(types_pb2.DT_FLOAT, [-1], float_val=[1.0]), "negative dimension"),
    (tensor_pb2.TensorProto(dtype=types_pb2.DT_FLOAT,
                            tensor_shape={"unknown_rank": True}), "known rank"),
    (typed(types_pb2.DT_RESOURCE, [1]), "DT_RESOURCE cannot be sent"),
    (typed(types_pb2.DT_INVALID, [1]), "DT_INVALID cannot be sent"),
    (typed(types_pb2.DT_STRING, [1], tensor_content=b"abc"), "must be in string_val"),
], ids=["content-size", "negative-dim", "unknown-rank", "resource", "invalid",
        "string-content"])
def test_malformed_protos_answer_invalid_argument(proto, message):
    with pytest.raises(ServingError) as caught:
        to_ndarray(proto)
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.message.startswith("malformed TensorProto: ")
    assert message in caught.value.message


def test_unsupported_numpy_dtypes_are_refused_when_encoding():
    with pytest.raises(TypeError, match="datetime64"):
        to_tensor_proto(np.array(["2020-01-01"], dtype="datetime64[D]"))


def test_encoding_into_a_response_map_entry():
    from tensorflow_serving.apis import predict_pb2
    response = predict_pb2.PredictResponse()
    array = np.arange(6, dtype=np.int64).reshape(2, 3)
    filled = to_tensor_proto(array, into=response.outputs["y"])
    assert filled is response.outputs["y"]
    assert_same(to_ndarray(response.outputs["y"]), array)
