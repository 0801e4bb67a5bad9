import numpy as np
import pytest
from onnx import helper

from compiler.errors import ConversionError, LoweringError, UnsupportedOpError
from compiler_test_helpers import F32, I64, make_model, run_pass


def test_lowerable_static_model_passes_unchanged():
    model = make_model([helper.make_node("Gemm", ["X", "W"], ["O"])], [("X", F32, [2, 3])], [("O", F32, [2, 4])],
                       {"W": np.ones((3, 4), np.float32)})
    assert run_pass(model, "final_check") == model


def test_unsupported_op_names_type_node_and_model_file():
    model = make_model([helper.make_node("Relu", ["X"], ["a"]), helper.make_node("Hardmax", ["a"], ["O"], name="erf_1")],
                       [("X", F32, [2])], [("O", F32, [2])])
    with pytest.raises(UnsupportedOpError) as e:
        run_pass(model, "final_check", model_name="models/bert.onnx")
    msg = str(e.value)
    assert msg.startswith("models/bert.onnx: unsupported op 'Hardmax' (node 'erf_1')")
    assert "Add" in msg and "MatMul" in msg  # lists what is supported


def test_custom_domain_op_is_unsupported():
    node = helper.make_node("FusedMatMul", ["X", "X"], ["O"], name="fm", domain="com.microsoft")
    model = make_model([node], [("X", F32, [2, 2])], [("O", F32, [2, 2])])
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    with pytest.raises(UnsupportedOpError, match="unsupported op 'com.microsoft::FusedMatMul' \\(node 'fm'\\)"):
        run_pass(model, "final_check")


def test_dynamic_shape_fails():
    model = make_model([helper.make_node("Relu", ["X"], ["O"])], [("X", F32, ["N", 2])], [("O", F32, ["N", 2])])
    with pytest.raises(ConversionError, match="graph input 'X' has shape \\[N, 2\\]"):
        run_pass(model, "final_check")


def test_invalid_onnx_fails_with_the_checker_message():
    model = make_model([helper.make_node("Relu", ["X"], ["O"], bogus_attr=1)], [("X", F32, [2])], [("O", F32, [2])])
    with pytest.raises(ConversionError, match="not valid ONNX"):
        run_pass(model, "final_check")


def test_unsupported_dtype_for_an_op():
    model = make_model([helper.make_node("MatMul", ["X", "X"], ["O"], name="mm")], [("X", I64, [2, 2])],
                       [("O", I64, [2, 2])])
    with pytest.raises(LoweringError, match="node 'mm' \\(MatMul\\): input 'X' has dtype int64"):
        run_pass(model, "final_check")
