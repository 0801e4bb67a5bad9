import numpy as np
from onnx import helper

from compiler_test_helpers import F32, assert_same_outputs, make_model, op_types, random_feeds, run_pass


def test_reshape_to_the_same_shape_is_removed_and_real_reshapes_stay():
    nodes = [helper.make_node("Reshape", ["X", "same"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Reshape", ["b", "flat"], ["O"])]
    model = make_model(nodes, [("X", F32, [2, 3])], [("O", F32, [6])],
                       {"same": np.array([2, -1], np.int64), "flat": np.array([6], np.int64)})
    out = run_pass(model, "eliminate_nop_reshape")
    assert op_types(out) == ["Relu", "Reshape"] and out.graph.node[0].input[0] == "X"
    assert_same_outputs(model, out, random_feeds(model))


def test_reshape_with_an_unknown_target_stays():
    nodes = [helper.make_node("Reshape", ["X", "S"], ["O"])]
    model = make_model(nodes, [("X", F32, [2, 3]), ("S", 7, [2])], [("O", F32, None)])
    assert op_types(run_pass(model, "eliminate_nop_reshape")) == ["Reshape"]
