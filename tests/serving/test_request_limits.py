"""Request limits checked before allocation, and admission control, without a server."""
import threading

import grpc
import numpy as np
import pytest

from serving.model_server import kserve_codec, rest_json
from serving.model_server.admission import Admission
from serving.model_server.errors import ServingError
from serving.model_server.request_limits import (MAX_JSON_DEPTH, check_json_depth,
                                                 max_decoded_tensor_bytes,
                                                 set_max_decoded_tensor_bytes)
from serving.model_server.tensor_codec import to_ndarray, to_tensor_proto


@pytest.fixture
def small_tensor_limit():
    previous = max_decoded_tensor_bytes()
    set_max_decoded_tensor_bytes(1024)
    yield 1024
    set_max_decoded_tensor_bytes(previous)


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_json_depth_at_the_limit_passes_and_one_more_is_refused():
    check_json_depth(_nested(MAX_JSON_DEPTH))
    with pytest.raises(ServingError) as caught:
        check_json_depth(_nested(MAX_JSON_DEPTH + 1))
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert f"depth {MAX_JSON_DEPTH + 1} exceeds the limit of {MAX_JSON_DEPTH}" in \
        caught.value.message


def test_json_depth_ignores_brackets_inside_strings_and_counts_siblings_once():
    check_json_depth(b'{"s": "' + b"[" * 5000 + b'\\" [[["}')
    check_json_depth(b"[" + b"[1, 2]," * 5000 + b"[3]]")


def test_rest_parse_body_refuses_deep_json_instead_of_recursing():
    with pytest.raises(ServingError, match="nesting depth"):
        rest_json.parse_body(b'{"instances": ' + b"[" * 200_000 + b"}")


def test_tensorproto_repeated_value_shape_refused_before_allocation(small_tensor_limit):
    proto = to_tensor_proto(np.zeros((1,), np.float32))
    proto.ClearField("tensor_content")
    proto.float_val.append(1.0)
    proto.tensor_shape.dim[0].size = 2 ** 40
    with pytest.raises(ServingError) as caught:
        to_ndarray(proto, "x")
    assert "input 'x'" in caught.value.message
    assert "limit of 1024 (--max_decoded_tensor_bytes)" in caught.value.message
    proto.tensor_shape.dim[0].size = 256          # exactly 1024 bytes
    assert to_ndarray(proto, "x").shape == (256,)


def test_tensorproto_string_shape_refused(small_tensor_limit):
    proto = to_tensor_proto(np.array([b"a"], dtype=object))
    proto.tensor_shape.dim[0].size = 10 ** 12
    with pytest.raises(ServingError, match="input 's'"):
        to_ndarray(proto, "s")


def test_empty_shapes_past_2pow63_bytes_are_refused_not_reshaped():
    proto = to_tensor_proto(np.zeros((0,), np.float32))
    for size in (2 ** 61, 3, 0)[1:]:
        proto.tensor_shape.dim.add().size = size
    proto.tensor_shape.dim[0].size = 2 ** 61     # 2^61 * 3 floats: past 2^63 bytes, 0 elements
    with pytest.raises(ServingError, match=r"input 'x': shape .* is too large"):
        to_ndarray(proto, "x")
    with pytest.raises(ServingError, match=r"input 't': shape .* is too large"):
        kserve_codec.from_json([], "FP64", [2 ** 61, 0, 2 ** 3], "t")


def test_kserve_bytes_shape_beyond_its_data_refused_before_allocation():
    with pytest.raises(ServingError) as caught:
        kserve_codec.from_raw(b"\0" * 8, "BYTES", [2 ** 20], "t")
    assert "cannot hold the 1048576 elements" in caught.value.message


def test_kserve_shapes_past_the_limit_are_refused(small_tensor_limit):
    for decode in (lambda: kserve_codec.from_raw(b"", "FP32", [2 ** 20, 2 ** 20], "t"),
                   lambda: kserve_codec.from_json([1.0], "FP32", [2 ** 40], "t")):
        with pytest.raises(ServingError, match="input 't'.*--max_decoded_tensor_bytes"):
            decode()


def test_admission_bounds_per_model_and_total():
    admission = Admission(max_total=3, max_per_model=2)
    admission.acquire("a")
    admission.acquire("a")
    with pytest.raises(ServingError) as caught:
        admission.acquire("a")
    assert caught.value.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "--max_queued_requests_per_model=2" in caught.value.message
    admission.acquire("b")
    with pytest.raises(ServingError, match="--max_queued_requests=3"):
        admission.acquire("c")
    admission.release("a")
    with admission.admitted("c"):
        assert admission.held == 3
    assert admission.held == 2


def test_admission_releases_on_error_and_under_contention():
    admission = Admission(max_total=0, max_per_model=5)
    with pytest.raises(RuntimeError):
        with admission.admitted("a"):
            raise RuntimeError("model failed")
    assert admission.held == 0
    admitted, refused = [], []
    barrier = threading.Barrier(20)

    def one():
        barrier.wait()
        try:
            admission.acquire("a")
            admitted.append(1)
        except ServingError:
            refused.append(1)
    threads = [threading.Thread(target=one) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert (len(admitted), len(refused)) == (5, 15)


def test_ragged_string_lists_are_refused_naming_the_input():
    import tensorflow as tf
    with pytest.raises(ServingError, match="input 's'.*ragged"):
        rest_json.to_array([[["t"]], [["x", "x"]]], tf.string, "s")


def test_kserve_datatype_that_is_not_a_string_is_refused():
    with pytest.raises(ServingError, match="input 'x': unsupported datatype"):
        kserve_codec.from_json([1], [], [1], "x")
