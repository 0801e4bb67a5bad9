"""Servable in-process: the fast signature call (flat inputs in the function's order) answers
what the ConcreteFunction's keyword call answers, and input checks name the offending input."""
import grpc
import numpy as np
import pytest

from serving.model_server.errors import ServingError
from serving.model_server.servable import Servable
from serving_models import expected_affine, save_affine


@pytest.fixture(scope="module")
def servable(tmp_path_factory):
    path = save_affine(str(tmp_path_factory.mktemp("affine") / "1"))
    loaded = Servable("affine", 1, path)
    loaded.load()
    return loaded


def test_flat_call_matches_keyword_call_with_several_inputs(servable):
    text = np.array([b"ab", b"", b"xyz"], dtype=object)
    numbers = np.arange(9, dtype=np.int32).reshape(3, 3)
    plan = servable._call_plan("two_io")
    assert plan.flat_call is not None and sorted(plan.order) == ["numbers", "text"]
    got = servable.run("two_io", {"text": text, "numbers": numbers})
    reference = servable._functions["two_io"](text=text, numbers=numbers)
    assert sorted(got) == sorted(reference)
    for name, value in reference.items():
        np.testing.assert_array_equal(got[name], value.numpy())
    np.testing.assert_array_equal(got["length"], [2, 0, 3])
    np.testing.assert_array_equal(got["total"], [3, 12, 21])


def test_default_signature_and_zero_rows(servable):
    x = np.array([[1, 2], [3, 4]], np.float32)
    np.testing.assert_array_equal(servable.run("", {"x": x})["y"], expected_affine(x))
    assert servable.run("", {"x": np.zeros((0, 2), np.float32)})["y"].shape == (0, 2)


@pytest.mark.parametrize("inputs,message", [
    ({"x": np.ones((1, 3), np.float32)},
     "input 'x' has shape [1,3] but signature 'serving_default' expects [-1,2]"),
    ({"x": np.ones((2,), np.float32)},
     "input 'x' has shape [2] but signature 'serving_default' expects [-1,2]"),
    ({"x": np.ones((1, 2), np.float64)},
     "input 'x' has dtype DT_DOUBLE but signature 'serving_default' expects DT_FLOAT"),
    ({"x": np.array([[b"a", b"b"]], dtype=object)},
     "input 'x' has dtype DT_STRING but signature 'serving_default' expects DT_FLOAT"),
    ({"x": np.ones((1, 2), np.float32), "z": np.ones(1, np.float32)},
     "input size does not match signature: 2!=1 len({x,z}) != len({x}). Sent extra: {z}. "
     "Missing but required: {}."),
    ({}, "input size does not match signature: 0!=1"),
], ids=["width", "rank", "dtype", "string-for-float", "extra", "missing"])
def test_input_checks(servable, inputs, message):
    with pytest.raises(ServingError) as caught:
        servable.run("", inputs)
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert message in caught.value.message


def test_numbers_for_a_string_input_are_refused(servable):
    with pytest.raises(ServingError, match="input 'numbers' has dtype DT_INT64 but signature "
                                           "'two_io' expects DT_INT32"):
        servable.run("two_io", {"text": np.array([b"a"], object),
                                "numbers": np.ones((1, 3), np.int64)})
    with pytest.raises(ServingError, match="input 'text' has dtype DT_FLOAT"):
        servable.run("two_io", {"text": np.ones(1, np.float32),
                                "numbers": np.ones((1, 3), np.int32)})
