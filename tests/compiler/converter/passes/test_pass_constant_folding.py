import numpy as np
import pytest
from onnx import helper, numpy_helper

from compiler.converter.passes import constant_folding
from compiler_test_helpers import F32, I64, assert_same_outputs, make_model, op_types, random_feeds, run_pass


def _initializer(model, name):
    return numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == name))


def test_folds_constant_subexpressions_and_keeps_runtime_ops():
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Transpose", ["W"], ["Wt"], perm=[1, 0]),
             helper.make_node("Mul", ["Wt", "two"], ["W2"]),
             helper.make_node("MatMul", ["X", "W2"], ["H"]),
             helper.make_node("Relu", ["H"], ["O"])]
    model = make_model(nodes, [("X", F32, [2, 3])], [("O", F32, [2, 4])],
                       {"W": rng.standard_normal((4, 3)).astype(np.float32), "two": np.array(2.0, np.float32)})
    out = run_pass(model, "constant_folding")
    assert op_types(out) == ["MatMul", "Relu"]
    np.testing.assert_allclose(_initializer(out, "W2"), _initializer(model, "W").T * 2)
    assert_same_outputs(model, out, random_feeds(model))


def test_constant_nodes_become_initializers():
    nodes = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array([1.5, 2.0], np.float32))),
             helper.make_node("Constant", [], ["k"], value_ints=[3, 4]),
             helper.make_node("Add", ["X", "c"], ["O"])]
    model = make_model(nodes, [("X", F32, [2])], [("O", F32, [2]), ("k", I64, [2])])
    out = run_pass(model, "constant_folding")
    assert op_types(out) == ["Add"]
    assert _initializer(out, "k").tolist() == [3, 4] and _initializer(out, "k").dtype == np.int64
    assert_same_outputs(model, out, random_feeds(model))


def test_shape_only_subgraph_feeding_reshape_folds_at_opset_11():
    # Flatten written by hand the way exporters do: Reshape(X, [dim0, prod(dims[1:])]).
    nodes = [helper.make_node("Shape", ["X"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["d0"], axis=0),
             helper.make_node("Unsqueeze", ["d0"], ["d0u"], axes=[0]),
             helper.make_node("Slice", ["s", "one", "big"], ["rest"]),
             helper.make_node("ReduceProd", ["rest"], ["n"], keepdims=1),
             helper.make_node("Concat", ["d0u", "n"], ["target"], axis=0),
             helper.make_node("Reshape", ["X", "target"], ["O"])]
    model = make_model(nodes, [("X", F32, [2, 3, 4])], [("O", F32, None)],
                       {"zero": np.array(0, np.int64), "one": np.array([1], np.int64),
                        "big": np.array([100], np.int64)}, opset=11)
    out = run_pass(model, ["constant_folding", "dead_code_elimination", "eliminate_unused_initializers",
                           "shape_inference"])
    assert op_types(out) == ["Reshape"]
    assert _initializer(out, "target").tolist() == [2, 12]
    assert [d.dim_value for d in out.graph.output[0].type.tensor_type.shape.dim] == [2, 12]
    assert_same_outputs(model, out, random_feeds(model))


def test_shapes_made_static_by_a_fold_are_used_in_the_same_round():
    # Each block reshapes by a target ONNX data propagation cannot evaluate (ReduceProd of a
    # Shape, as tf2onnx writes for an Einsum), so inference leaves the Reshape's dims unknown, and
    # the Add against a [1] constant keeps them unknown (1 broadcasts against anything): the next
    # block's Shape is static only once the previous target is folded. More blocks than folding
    # rounds, so a pass that waits for the next round's inference would stop halfway.
    blocks = constant_folding._MAX_ROUNDS + 4
    nodes = []
    for k in range(blocks):
        h, nxt = f"h{k}", f"h{k + 1}" if k + 1 < blocks else "O"
        nodes += [helper.make_node("Shape", [h], [f"s{k}"]),
                  helper.make_node("ReduceProd", [f"s{k}"], [f"n{k}"], keepdims=1),
                  helper.make_node("Reshape", [h, f"n{k}"], [f"r{k}"]),
                  helper.make_node("Add", [f"r{k}", "one"], [nxt])]
    model = make_model(nodes, [("h0", F32, [6])], [("O", F32, None)], {"one": np.ones(1, np.float32)})
    out = run_pass(model, ["constant_folding", "shape_inference"])
    assert op_types(out) == ["Reshape", "Add"] * blocks
    assert [d.dim_value for d in out.graph.output[0].type.tensor_type.shape.dim] == [6]
    assert_same_outputs(model, out, random_feeds(model))


def test_shape_with_start_end_and_size_fold():
    nodes = [helper.make_node("Shape", ["X"], ["s"], start=1, end=-1),
             helper.make_node("Size", ["X"], ["n"]),
             helper.make_node("Relu", ["X"], ["O"])]
    model = make_model(nodes, [("X", F32, [2, 3, 4, 5])], [("O", F32, None), ("s", I64, None), ("n", I64, None)],
                       opset=15)
    out = run_pass(model, "constant_folding")
    assert op_types(out) == ["Relu"]
    assert _initializer(out, "s").tolist() == [3, 4] and int(_initializer(out, "n")) == 120
    assert_same_outputs(model, out, random_feeds(model))


def test_shape_of_a_dynamic_tensor_is_not_folded():
    nodes = [helper.make_node("Shape", ["X"], ["s"])]
    model = make_model(nodes, [("X", F32, ["N", 3])], [("s", I64, None)])
    assert op_types(run_pass(model, "constant_folding")) == ["Shape"]


@pytest.mark.parametrize("limit, folded", [(-1, True), (4096, True), (4095, False), (0, False)])
def test_max_tensor_size_bounds_the_folded_results(limit, folded):
    # Tile makes a 1024-element float32 (4096 bytes) constant.
    nodes = [helper.make_node("Tile", ["c", "reps"], ["big"]), helper.make_node("Add", ["X", "big"], ["O"])]
    model = make_model(nodes, [("X", F32, [1024])], [("O", F32, [1024])],
                       {"c": np.arange(4, dtype=np.float32), "reps": np.array([256], np.int64)})
    out = run_pass(model, "constant_folding", max_tensor_size=limit)
    assert op_types(out) == (["Add"] if folded else ["Tile", "Add"])
    assert_same_outputs(model, out, random_feeds(model))


def test_random_ops_are_not_folded():
    nodes = [helper.make_node("RandomUniform", [], ["r"], shape=[2], dtype=1),
             helper.make_node("Add", ["X", "r"], ["O"])]
    model = make_model(nodes, [("X", F32, [2])], [("O", F32, [2])])
    assert op_types(run_pass(model, "constant_folding")) == ["RandomUniform", "Add"]


def test_folded_graph_output_stays_an_output():
    nodes = [helper.make_node("Add", ["a", "b"], ["O"]), helper.make_node("Relu", ["X"], ["P"])]
    model = make_model(nodes, [("X", F32, [2])], [("O", F32, [2]), ("P", F32, [2])],
                       {"a": np.ones(2, np.float32), "b": np.full(2, 2.0, np.float32)})
    out = run_pass(model, "constant_folding")
    assert op_types(out) == ["Relu"]
    assert [o.name for o in out.graph.output] == ["O", "P"]
    assert _initializer(out, "O").tolist() == [3.0, 3.0]


def test_optional_empty_inputs_are_allowed():
    # Clip with an empty `min` input and a constant `max`.
    nodes = [helper.make_node("Clip", ["c", "", "hi"], ["k"]), helper.make_node("Add", ["X", "k"], ["O"])]
    model = make_model(nodes, [("X", F32, [3])], [("O", F32, [3])],
                       {"c": np.array([-1.0, 0.5, 9.0], np.float32), "hi": np.array(1.0, np.float32)})
    out = run_pass(model, "constant_folding")
    assert op_types(out) == ["Add"]
    assert _initializer(out, "k").tolist() == [-1.0, 0.5, 1.0]


def test_window_op_with_a_huge_padded_constant_input_is_left_unfolded():
    """The reference implementation would pad a 4x4 image to 1,048,580 rows first."""
    w = np.ones((2, 2, 3, 3), np.float32)
    model = make_model([helper.make_node("Conv", ["W", "W"], ["c"], kernel_shape=[3, 3], pads=[1 << 20, 1, 1, 1]),
                        helper.make_node("Add", ["X", "one"], ["O"])],
                       [("X", F32, [1])], [("O", F32, [1]), ("c", F32, None)],
                       {"W": w, "one": np.ones(1, np.float32)})
    assert "Conv" in op_types(run_pass(model, ["constant_folding"]))
    small = make_model([helper.make_node("Conv", ["W", "W"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
                       [], [("c", F32, None)], {"W": w})
    assert "Conv" not in op_types(run_pass(small, ["constant_folding"]))
