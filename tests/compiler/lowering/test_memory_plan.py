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
    assert plan.aliases == {"v": "a", "cv": "c"}
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
