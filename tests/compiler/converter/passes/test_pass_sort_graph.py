import numpy as np
import pytest
from onnx import helper

from compiler.errors import ConversionError
from compiler_test_helpers import F32, make_model, reference_run, run_pass


def test_unsorted_graph_gets_a_topological_order():
    nodes = [helper.make_node("Mul", ["a", "b"], ["O"], name="mul"), helper.make_node("Relu", ["X"], ["a"], name="r"),
             helper.make_node("Neg", ["a"], ["b"], name="n")]
    model = make_model(nodes, [("X", F32, [4])], [("O", F32, [4])])
    out = run_pass(model, "sort_graph")
    assert [n.name for n in out.graph.node] == ["r", "n", "mul"]
    x = np.array([-1.0, 0.5, 2.0, -3.0], np.float32)
    np.testing.assert_allclose(reference_run(out, {"X": x})[0], -np.maximum(x, 0) ** 2)


def test_sorted_graph_keeps_its_order():
    nodes = [helper.make_node("Relu", ["X"], ["a"], name="r"), helper.make_node("Neg", ["X"], ["b"], name="n"),
             helper.make_node("Add", ["a", "b"], ["O"], name="add")]
    model = make_model(nodes, [("X", F32, [2])], [("O", F32, [2])])
    assert [n.name for n in run_pass(model, "sort_graph").graph.node] == ["r", "n", "add"]


def test_cycle_is_an_error_naming_the_nodes():
    nodes = [helper.make_node("Add", ["X", "b"], ["a"], name="first"), helper.make_node("Relu", ["a"], ["b"], name="second"),
             helper.make_node("Relu", ["a"], ["O"], name="out")]
    model = make_model(nodes, [("X", F32, [2])], [("O", F32, [2])])
    with pytest.raises(ConversionError, match="cycle through nodes 'first' \\(Add\\), 'second' \\(Relu\\)"):
        run_pass(model, "sort_graph")


def test_read_of_an_undefined_tensor_is_an_error():
    model = make_model([helper.make_node("Relu", ["nowhere"], ["O"], name="lost")], [], [("O", F32, [2])])
    with pytest.raises(ConversionError, match="node 'lost' \\(Relu\\) reads tensor 'nowhere'"):
        run_pass(model, "sort_graph")
