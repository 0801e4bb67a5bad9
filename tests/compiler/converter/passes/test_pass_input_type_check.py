import pytest
from onnx import TensorProto, helper

from compiler.errors import ConversionError
from compiler_test_helpers import F32, make_model, run_pass


def _identity(elem_type, shape):
    return make_model([helper.make_node("Identity", ["X"], ["O"])], [("X", elem_type, shape)], [("O", elem_type, None)])


@pytest.mark.parametrize("elem_type, name", [(TensorProto.COMPLEX128, "complex128"), (TensorProto.STRING, "string"),
                                             (TensorProto.BFLOAT16, "bfloat16")])
def test_an_input_of_an_unsupported_element_type_is_refused_naming_it(elem_type, name):
    with pytest.raises(ConversionError, match=rf"input 'X' has element type {name}, which the emulator does not support"):
        run_pass(_identity(elem_type, [3]), "input_type_check")


def test_a_huge_complex_input_is_refused_before_shape_inference_allocates_from_it():
    # Expand(Z, Z) of a complex128 [2^31] input: onnx's inference built an output of rank 2^31 (19 GB)
    # because input_size_check cannot size a type the emulator lacks.
    model = make_model([helper.make_node("Add", ["X", "X"], ["Z"]), helper.make_node("Expand", ["Z", "Z"], ["O"])],
                       [("X", TensorProto.COMPLEX128, [1 << 31])], [("O", F32, None)])
    with pytest.raises(ConversionError, match="complex128"):
        run_pass(model, ["input_type_check", "input_size_check", "constant_folding"], max_input_bytes=940_572_672)


def test_a_sequence_input_is_refused():
    model = make_model([helper.make_node("Identity", ["X"], ["O"])], [("X", F32, [2])], [("O", F32, None)])
    model.graph.input[0].type.CopyFrom(helper.make_sequence_type_proto(helper.make_tensor_type_proto(F32, [2])))
    with pytest.raises(ConversionError, match="input 'X' is a sequence type; the emulator takes tensors only"):
        run_pass(model, "input_type_check")


def test_supported_inputs_pass_unchanged():
    model = _identity(F32, [2, 3])
    assert run_pass(model, "input_type_check") == model
