import numpy as np
import pytest
from onnx import helper

from compiler.errors import ConversionError
from compiler_test_helpers import F32, I64, make_model, run_pass


def _dims(vi):
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in vi.type.tensor_type.shape.dim]


def test_fills_value_info_and_output_shapes():
    model = make_model([helper.make_node("MatMul", ["X", "W"], ["H"]), helper.make_node("Relu", ["H"], ["O"])],
                       [("X", F32, [4, 3])], [("O", F32, None)], {"W": np.ones((3, 5), np.float32)})
    out = run_pass(model, "shape_inference")
    assert {vi.name: _dims(vi) for vi in out.graph.value_info} == {"H": [4, 5]}
    assert _dims(out.graph.output[0]) == [4, 5]


def test_stale_declared_output_shape_is_replaced():
    # The declared [1, 2] predates a new input shape; inference must not conflict with it.
    model = make_model([helper.make_node("Relu", ["X"], ["O"])], [("X", F32, [8, 2])], [("O", F32, [1, 2])])
    out = run_pass(model, "shape_inference")
    assert _dims(out.graph.output[0]) == [8, 2]


def test_data_propagation_makes_reshape_of_a_shape_computation_static():
    # onnx propagates shape values into Reshape from opset 18 (older opsets rely on folding).
    nodes = [helper.make_node("Shape", ["X"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
             helper.make_node("Concat", ["b", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["X", "target"], ["O"])]
    model = make_model(nodes, [("X", F32, [2, 3, 4])], [("O", F32, None)],
                       {"zero": np.array([0], np.int64), "minus1": np.array([-1], np.int64)}, opset=18)
    out = run_pass(model, "shape_inference")
    assert _dims(out.graph.output[0]) == [2, 12]


def test_dynamic_input_is_an_error_naming_it():
    model = make_model([helper.make_node("Relu", ["X"], ["O"])], [("X", F32, ["N", 2])], [("O", F32, None)])
    with pytest.raises(ConversionError) as e:
        run_pass(model, "shape_inference")
    assert "graph input 'X' has shape [N, 2], which is not static" in str(e.value)
    assert "--input_shape X=" in str(e.value)


def test_dynamic_intermediate_is_an_error_naming_tensor_and_node():
    # Reshape to a runtime-computed shape: unknown without folding.
    nodes = [helper.make_node("Relu", ["S"], ["s2"], name="relu_shape"),
             helper.make_node("Reshape", ["X", "s2"], ["O"], name="reshape_dyn")]
    model = make_model(nodes, [("X", F32, [2, 3]), ("S", I64, [2])], [("O", F32, None)], opset=14)
    with pytest.raises(ConversionError) as e:
        run_pass(model, "shape_inference")
    msg = str(e.value)
    assert "tensor 'O'" in msg and "'reshape_dyn' (Reshape)" in msg and "test.onnx" in msg


def test_type_errors_are_reported_with_the_node():
    model = make_model([helper.make_node("Add", ["X", "Y"], ["O"], name="bad_add")],
                       [("X", F32, [2]), ("Y", I64, [2])], [("O", F32, None)])
    with pytest.raises(ConversionError) as e:
        run_pass(model, "shape_inference")
    assert "shape inference failed" in str(e.value) and "bad_add" in str(e.value)
