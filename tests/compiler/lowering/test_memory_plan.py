import numpy as np
import pytest
from onnx import helper

from compiler.lowering.lower_graph import lower_graph
from compiler.lowering.memory_plan import plan_arena
from compiler.lowering.weights import WeightStore
from compiler_test_helpers import F32, make_model
from plan_checks import check_plan


def _lower(model):
    # Without kernel fusion: these chains of elementwise ops would become one FusedElementwise
    # step, and the tests are about how the planner shares bytes between steps.
    graph = lower_graph(model, WeightStore(), "test.onnx")
    return graph, plan_arena(graph)


def test_chain_of_six_ops_reuses_bytes():
    ops = ["Relu", "Sigmoid", "Tanh", "Relu", "Sigmoid", "Tanh"]
    names = ["X", "t1", "t2", "t3", "t4", "t5", "O"]
    nodes = [helper.make_node(op, [names[i]], [names[i + 1]]) for i, op in enumerate(ops)]
    graph, plan = _lower(make_model(nodes, [("X", F32, [64, 64])], [("O", F32, [64, 64])]))
    intermediates = [t for t in graph.tensors.values() if t.storage == "arena"]
    assert len(intermediates) == 5
    assert plan.size < sum(t.nbytes for t in intermediates)
    assert plan.size == 2 * 64 * 64 * 4  # a chain needs exactly two buffers (ping-pong)
    check_plan(graph, plan)


def test_live_tensors_never_share_bytes_in_a_diamond():
    nodes = [helper.make_node("Relu", ["X"], ["a"]), helper.make_node("Sigmoid", ["a"], ["b"]),
             helper.make_node("Tanh", ["a"], ["c"]), helper.make_node("Add", ["b", "c"], ["d"]),
             helper.make_node("Mul", ["d", "a"], ["e"]), helper.make_node("Relu", ["e"], ["O"])]
    graph, plan = _lower(make_model(nodes, [("X", F32, [10, 10])], [("O", F32, [10, 10])]))
    check_plan(graph, plan)
    # a is read by the Mul (step 4): nothing produced before that may take its bytes
    assert len({plan.offsets[n] for n in ("a", "b", "c")}) == 3


def test_reshape_view_aliases_its_input_and_extends_its_life():
    nodes = [helper.make_node("Relu", ["X"], ["a"]), helper.make_node("Reshape", ["a", "s"], ["v"]),
             helper.make_node("Sigmoid", ["X"], ["b"]), helper.make_node("Tanh", ["b"], ["c"]),
             helper.make_node("Reshape", ["c", "s"], ["cv"]), helper.make_node("Add", ["v", "cv"], ["O"])]
    model = make_model(nodes, [("X", F32, [4, 16])], [("O", F32, [64])], {"s": np.array([64], np.int64)})
    graph, plan = _lower(model)
    assert plan.aliases == {"v": ("a", 0), "cv": ("c", 0)}
    assert plan.offsets["v"] == plan.offsets["a"] and plan.offsets["cv"] == plan.offsets["c"]
    # a's bytes stay reserved until its view v is read by the Add (last step)
    assert plan.offsets["a"] != plan.offsets["b"] and plan.offsets["a"] != plan.offsets["c"]
    check_plan(graph, plan)


def test_reshape_from_an_input_or_to_an_output_is_a_copy_not_an_alias():
    nodes = [helper.make_node("Reshape", ["X", "s"], ["v"]), helper.make_node("Relu", ["v"], ["r"]),
             helper.make_node("Reshape", ["r", "s2"], ["O"])]
    model = make_model(nodes, [("X", F32, [2, 8])], [("O", F32, [2, 8])],
                       {"s": np.array([16], np.int64), "s2": np.array([2, 8], np.int64)})
    graph, plan = _lower(model)
    assert plan.aliases == {}
    assert [t.storage for t in (graph.tensors["v"], graph.tensors["r"], graph.tensors["O"])] == \
        ["arena", "arena", "output"]


@pytest.mark.parametrize("seed", range(20))
def test_random_graphs_get_valid_plans(seed):
    rng = np.random.default_rng(seed)
    available, nodes = ["X"], []
    for i in range(int(rng.integers(3, 25))):
        kind = rng.integers(0, 3)
        if kind == 0:
            nodes.append(helper.make_node(str(rng.choice(["Relu", "Sigmoid", "Tanh"])),
                                          [str(rng.choice(available))], [f"t{i}"]))
        elif kind == 1:
            a, b = rng.choice(available, 2)
            nodes.append(helper.make_node("Add", [str(a), str(b)], [f"t{i}"]))
        else:
            nodes.append(helper.make_node("Reshape", [str(rng.choice(available)), "s"], [f"t{i}"]))
        available.append(f"t{i}")
    outs = sorted(set(str(o) for o in rng.choice(available[1:], min(2, len(available) - 1), replace=False)))
    model = make_model(nodes, [("X", F32, [8, 8])], [(o, F32, [8, 8]) for o in outs], {"s": np.array([8, 8], np.int64)})
    graph, plan = _lower(model)
    check_plan(graph, plan)
    arena = [t for t in graph.tensors.values() if t.storage == "arena"]
    assert plan.size <= sum(-(-t.nbytes // 64) * 64 for t in arena)


def test_no_arena_when_every_tensor_is_an_anchor():
    graph, plan = _lower(make_model([helper.make_node("Add", ["X", "Y"], ["O"])],
                                    [("X", F32, [4, 2]), ("Y", F32, [4, 2])], [("O", F32, [4, 2])]))
    assert plan.size == 0 and plan.offsets == {}


# ---------------------------------------------------------------- Concat inputs in place

C = [1, 16, 4]  # float32 [1, 16, 4]: 256 bytes, 64-aligned slices along axis 1


def _concat_model(nodes, outputs, inputs=(("X", F32, C),), initializers=None):
    return make_model(nodes, list(inputs), outputs, initializers)


def test_concat_inputs_written_by_steps_are_placed_at_their_slices():
    nodes = [helper.make_node("Relu", ["X"], ["a"]), helper.make_node("Sigmoid", ["X"], ["b"]),
             helper.make_node("Tanh", ["X"], ["c"]), helper.make_node("Concat", ["a", "b", "c"], ["cat"], axis=1),
             helper.make_node("Relu", ["cat"], ["O"])]
    graph, plan = _lower(_concat_model(nodes, [("O", F32, [1, 48, 4])]))
    assert plan.aliases == {"a": ("cat", 0), "b": ("cat", 256), "c": ("cat", 512)}
    assert [plan.offsets[n] - plan.offsets["cat"] for n in "abc"] == [0, 256, 512]
    assert plan.size == 768  # the three inputs take no bytes of their own
    check_plan(graph, plan)


def test_a_chain_of_concats_resolves_into_one_buffer():
    # DenseNet: cat_k = Concat(cat_k-1, x_k), x_k computed from cat_k-1.
    nodes = [helper.make_node("Relu", ["X"], ["x0"])]
    previous = "x0"
    for k in range(1, 4):
        nodes += [helper.make_node("Sigmoid", [previous], [f"r{k}"]),
                  helper.make_node("ReduceMax", [f"r{k}"], [f"x{k}"], axes=[1], keepdims=1),
                  helper.make_node("Concat", [previous, f"x{k}"], [f"cat{k}"], axis=1)]
        previous = f"cat{k}"
    nodes.append(helper.make_node("Relu", [previous], ["O"]))
    graph, plan = _lower(_concat_model(nodes, [("O", F32, [1, 19, 4])], inputs=[("X", F32, [1, 16, 4])]))
    # x_k is [1, 1, 4] (16 bytes): only slices at 64-byte aligned offsets are placed
    assert plan.aliases["x0"] == ("cat1", 0) and plan.aliases["cat1"] == ("cat2", 0)
    assert plan.aliases["cat2"] == ("cat3", 0)
    assert plan.aliases["x1"] == ("cat1", 256) and "x2" not in plan.aliases and "x3" not in plan.aliases
    assert plan.offsets["x0"] == plan.offsets["cat1"] == plan.offsets["cat3"]
    check_plan(graph, plan)


def test_a_dense_block_chain_with_aligned_growth_is_fully_in_place():
    nodes = [helper.make_node("Relu", ["X"], ["x0"])]
    previous, width = "x0", 16
    for k in range(1, 4):
        nodes += [helper.make_node("Sigmoid", [previous], [f"r{k}"]),
                  helper.make_node("Slice", [f"r{k}", "starts", "ends", "axes"], [f"x{k}"]),
                  helper.make_node("Concat", [previous, f"x{k}"], [f"cat{k}"], axis=1)]
        previous, width = f"cat{k}", width + 4
    nodes.append(helper.make_node("Relu", [previous], ["O"]))
    inits = {"starts": np.array([0], np.int64), "ends": np.array([4], np.int64), "axes": np.array([1], np.int64)}
    graph, plan = _lower(_concat_model(nodes, [("O", F32, [1, width, 4])], initializers=inits))
    root = plan.offsets["cat3"]
    assert [plan.offsets[f"x{k}"] - root for k in range(4)] == [0, 256, 320, 384]
    assert {plan.aliases[f"cat{k}"] for k in (1, 2)} == {("cat2", 0), ("cat3", 0)}
    check_plan(graph, plan)


@pytest.mark.parametrize("case", ["repeated", "graph_input", "constant", "batch_of_two", "graph_output"])
def test_concat_inputs_that_must_be_copied(case):
    shape, out_shape = ([2, 16, 4], [2, 32, 4]) if case == "batch_of_two" else (C, [1, 32, 4])
    inputs, inits = [("X", F32, shape)], {}
    nodes = [helper.make_node("Relu", ["X"], ["a"])]
    concat_inputs = {"repeated": ["a", "a"], "graph_input": ["X", "a"], "constant": ["W", "a"],
                     "batch_of_two": ["a", "a2"], "graph_output": ["a", "a2"]}[case]
    if case in ("batch_of_two", "graph_output"):
        nodes.append(helper.make_node("Tanh", ["X"], ["a2"]))
    if case == "constant":
        inits["W"] = np.ones(C, np.float32)
    nodes += [helper.make_node("Concat", concat_inputs, ["cat"], axis=1), helper.make_node("Relu", ["cat"], ["O"])]
    outputs = [("O", F32, out_shape)] + ([("a2", F32, C)] if case == "graph_output" else [])
    graph, plan = _lower(_concat_model(nodes, outputs, inputs, inits))
    placed = {"repeated": {}, "graph_input": {"a": ("cat", 256)}, "constant": {"a": ("cat", 256)},
              "batch_of_two": {}, "graph_output": {"a": ("cat", 0)}}[case]
    assert plan.aliases == placed
    check_plan(graph, plan)


def test_an_input_read_by_two_concats_is_placed_in_the_first_only():
    nodes = [helper.make_node("Relu", ["X"], ["a"]), helper.make_node("Tanh", ["X"], ["b"]),
             helper.make_node("Sigmoid", ["X"], ["c"]),
             helper.make_node("Concat", ["a", "b"], ["cat1"], axis=1),
             helper.make_node("Concat", ["c", "a"], ["cat2"], axis=1),
             helper.make_node("Add", ["cat1", "cat2"], ["O"])]
    graph, plan = _lower(_concat_model(nodes, [("O", F32, [1, 32, 4])]))
    assert plan.aliases == {"a": ("cat1", 0), "b": ("cat1", 256), "c": ("cat2", 0)}
    check_plan(graph, plan)


def test_a_reshape_view_is_copied_into_a_concat_but_its_source_is_placed():
    nodes = [helper.make_node("Relu", ["X"], ["a"]), helper.make_node("Reshape", ["a", "s"], ["v"]),
             helper.make_node("Tanh", ["X"], ["b"]),
             helper.make_node("Concat", ["v", "b"], ["cat1"], axis=1),
             helper.make_node("Concat", ["b", "a"], ["cat2"], axis=1),
             helper.make_node("Add", ["cat1", "cat2"], ["O"])]
    model = _concat_model(nodes, [("O", F32, [1, 32, 4])], initializers={"s": np.array(C, np.int64)})
    graph, plan = _lower(model)
    assert plan.aliases == {"v": ("a", 0), "b": ("cat1", 256), "a": ("cat2", 256)}
    assert plan.offsets["v"] == plan.offsets["a"] == plan.offsets["cat2"] + 256
    check_plan(graph, plan)
