import numpy as np
from onnx import helper

from compiler_test_helpers import F32, assert_same_outputs, make_model, random_feeds, run_pass


def test_unused_initializers_go_used_and_output_ones_stay():
    nodes = [helper.make_node("Add", ["X", "W"], ["O"])]
    model = make_model(nodes, [("X", F32, [2])], [("O", F32, [2]), ("C", F32, [2])],
                       {"W": np.ones(2, np.float32), "unused": np.zeros(7, np.float32), "C": np.ones(2, np.float32)})
    out = run_pass(model, "eliminate_unused_initializers")
    assert sorted(t.name for t in out.graph.initializer) == ["C", "W"]
    assert_same_outputs(model, out, random_feeds(model))


def test_old_models_listing_initializers_as_inputs_lose_both_entries():
    nodes = [helper.make_node("Add", ["X", "W"], ["O"])]
    model = make_model(nodes, [("X", F32, [2]), ("W", F32, [2]), ("unused", F32, [3])], [("O", F32, [2])],
                       {"W": np.ones(2, np.float32), "unused": np.zeros(3, np.float32)}, opset=11, ir_version=3)
    out = run_pass(model, "eliminate_unused_initializers")
    assert [t.name for t in out.graph.initializer] == ["W"]
    assert [i.name for i in out.graph.input] == ["X", "W"]
