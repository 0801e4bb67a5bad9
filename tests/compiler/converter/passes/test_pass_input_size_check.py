import pytest
from onnx import TensorProto, helper

from compiler.errors import DeviceMemoryError
from compiler_test_helpers import F32, make_model, run_pass


def _relu(shape, elem_type=F32):
    return make_model([helper.make_node("Relu", ["X"], ["O"])], [("X", elem_type, shape)], [("O", elem_type, None)])


def test_an_input_larger_than_the_limit_is_refused_naming_it():
    with pytest.raises(DeviceMemoryError) as e:
        run_pass(_relu([1 << 31], TensorProto.FLOAT16), "input_size_check", max_input_bytes=940_572_672)
    assert str(e.value) == ("test.onnx: input 'X' (float16 [2147483648]) needs 4,294,967,296 bytes, more than the "
                            "device memory of 940,572,672; reduce the batch size or the input shapes")


def test_the_limit_applies_to_the_shape_set_by_batch_size():
    model = _relu([1 << 31, 4])
    run_pass(model, ["const_batch_size", "input_size_check"], batch_size=2, max_input_bytes=32)
    with pytest.raises(DeviceMemoryError, match=r"input 'X' \(float32 \[3, 4\]\) needs 48 bytes"):
        run_pass(model, ["const_batch_size", "input_size_check"], batch_size=3, max_input_bytes=32)


def test_inputs_within_the_limit_symbolic_dims_and_no_limit_pass():
    assert run_pass(_relu([2, 4]), "input_size_check", max_input_bytes=32) == _relu([2, 4])
    assert run_pass(_relu(["n", 1 << 40]), "input_size_check", max_input_bytes=32) == _relu(["n", 1 << 40])
    assert run_pass(_relu([1 << 40]), "input_size_check") == _relu([1 << 40])
