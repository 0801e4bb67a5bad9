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


def squeeze_then_reshape(extra_reader=False, target=(2, 8, 1, 1)):
    """tf2onnx's squeeze-and-excite entry: GlobalAveragePool -> Squeeze -> Reshape -> 1x1 Conv."""
    nodes = [helper.make_node("GlobalAveragePool", ["X"], ["pooled"]),
             helper.make_node("Squeeze", ["pooled", "axes"], ["flat"]),
             helper.make_node("Reshape", ["flat", "shape"], ["again"]),
             helper.make_node("Conv", ["again", "W"], ["O"])]
    outputs = [("O", F32, [2, 4, 1, 1] if target[1] == 8 else None)]
    if extra_reader:
        nodes.append(helper.make_node("Relu", ["flat"], ["R"]))
        outputs.append(("R", F32, [2, 8]))
    rng = np.random.default_rng(0)
    inits = {"axes": np.array([2, 3], np.int64), "shape": np.array(target, np.int64),
             "W": rng.standard_normal((4, target[1], 1, 1)).astype(np.float32)}
    return make_model(nodes, [("X", F32, [2, 8, 3, 3])], outputs, inits)


def test_a_reshaping_chain_back_to_its_input_shape_is_removed():
    model = squeeze_then_reshape()
    out = run_pass(model, "eliminate_nop_reshape")
    assert op_types(out) == ["GlobalAveragePool", "Conv"] and out.graph.node[1].input[0] == "pooled"
    assert_same_outputs(model, out, random_feeds(model))


def test_a_reshaping_chain_stays_when_its_middle_is_read_or_its_end_shape_differs():
    for model in (squeeze_then_reshape(extra_reader=True), squeeze_then_reshape(target=(1, 16, 1, 1))):
        assert op_types(run_pass(model, "eliminate_nop_reshape")).count("Squeeze") == 1
