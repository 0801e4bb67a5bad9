import numpy as np
import pytest
from onnx import helper

from compiler.errors import LoweringError
from compiler.lowering.lower_graph import lower_graph
from compiler.lowering.weights import WeightStore
from compiler_test_helpers import F16, F32, I64, fuse_and_lower, make_model


def test_storage_of_inputs_outputs_weights_and_intermediates():
    nodes = [helper.make_node("MatMul", ["X", "W"], ["h"]), helper.make_node("Relu", ["h"], ["O"]),
             helper.make_node("Sigmoid", ["O"], ["P"])]
    model = make_model(nodes, [("X", F32, [2, 3])], [("O", F32, [2, 4]), ("P", F32, [2, 4])],
                       {"W": np.ones((3, 4), np.float32)})
    g = lower_graph(model, WeightStore(), "m.onnx")  # h stays an intermediate
    storage = {n: (t.storage, t.anchor) for n, t in g.tensors.items()}
    assert storage == {"X": ("input", "X"), "W": ("weight", None), "h": ("arena", None), "O": ("output", "O"),
                       "P": ("output", "P")}
    assert g.inputs == ["X"] and g.outputs == ["O", "P"]
    assert [(s.op, s.inputs, s.outputs) for s in g.steps] == [("MatMul", ["X", "W"], ["h"]), ("Relu", ["h"], ["O"]),
                                                              ("Sigmoid", ["O"], ["P"])]


def test_initializers_listed_as_inputs_are_not_anchors():
    model = make_model([helper.make_node("Add", ["X", "W"], ["O"])], [("X", F32, [2]), ("W", F32, [2])],
                       [("O", F32, [2])], {"W": np.ones(2, np.float32)}, opset=11, ir_version=3)
    g = fuse_and_lower(model, WeightStore())
    assert g.inputs == ["X"] and g.tensors["W"].storage == "weight"


def test_constant_output_gets_a_copy_step():
    nodes = [helper.make_node("Relu", ["X"], ["O"])]
    model = make_model(nodes, [("X", F32, [2])], [("O", F32, [2]), ("C", I64, [3])], {"C": np.arange(3)})
    g = fuse_and_lower(model, WeightStore())
    copy = g.steps[-1]
    assert (copy.op, copy.inputs, copy.outputs) == ("Reshape", ["C"], ["C:output"])
    assert g.tensors["C"].storage == "weight"
    assert (g.tensors["C:output"].storage, g.tensors["C:output"].anchor) == ("output", "C")
    assert g.outputs == ["O", "C"]


def test_constant_node_output_as_graph_output():
    from onnx import numpy_helper
    nodes = [helper.make_node("Constant", [], ["C"], value=numpy_helper.from_array(np.ones(2, np.float16)))]
    g = fuse_and_lower(make_model(nodes, [], [("C", F16, [2])]), WeightStore())
    assert [(s.op, s.inputs, s.outputs) for s in g.steps] == [("Reshape", ["C"], ["C:output"])]


def test_output_that_is_an_input_is_refused():
    model = make_model([helper.make_node("Relu", ["X"], ["O"])], [("X", F32, [2])], [("O", F32, [2]), ("X", F32, [2])])
    with pytest.raises(LoweringError, match="'X' is both a graph input and a graph output"):
        fuse_and_lower(model, WeightStore(), "m.onnx")


def test_batch_size_from_the_first_input_or_given():
    model = make_model([helper.make_node("Relu", ["X"], ["O"])], [("X", F32, [3, 5])], [("O", F32, [3, 5])])
    assert fuse_and_lower(model, WeightStore()).batch_size == 3
    assert fuse_and_lower(model, WeightStore(), batch_axis=1).batch_size == 5
    assert fuse_and_lower(model, WeightStore(), batch_size=3).batch_size == 3
    g = fuse_and_lower(model, WeightStore(), batch_axis=2)  # no input has that axis
    assert g.batch_size == 1 and g.anchor_batch_axis(g.tensors["X"]) == -1


def test_non_static_tensors_are_refused_with_their_name():
    model = make_model([helper.make_node("Relu", ["X"], ["O"])], [("X", F32, ["N", 5])], [("O", F32, ["N", 5])])
    with pytest.raises(LoweringError, match="graph input 'X' has a non-static shape \\[N, 5\\]"):
        fuse_and_lower(model, WeightStore(), "m.onnx")


def test_unsupported_dtype_of_an_input():
    model = make_model([helper.make_node("Identity", ["X"], ["O"])], [("X", 16, [2])], [("O", 16, [2])])  # bfloat16
    with pytest.raises(LoweringError, match="graph input 'X' has dtype bfloat16, which the emulator does not support"):
        fuse_and_lower(model, WeightStore(), "m.onnx")
