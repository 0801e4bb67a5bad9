"""The memory plan's in-place Sum: an NchwcConv's Y takes its residual Sum's bytes when the Sum's
buffer dies at that step (compiler/lowering/memory_plan.py), and not otherwise."""
from typing import Dict, List, Optional

from compiler.lowering.ir import KernelStep, LoweredGraph, TensorValue
from compiler.lowering.memory_plan import plan_arena
from plan_checks import check_plan

SHAPE = (1, 4, 7, 7, 8)


def _graph(tensors: Dict[str, tuple], steps: List[KernelStep], outputs=("O",)) -> LoweredGraph:
    """tensors: name -> (storage, dtype[, shape])."""
    graph = LoweredGraph("g", inputs=["X"], outputs=list(outputs))
    for name, spec in tensors.items():
        storage, dtype = spec[0], spec[1]
        shape = spec[2] if len(spec) > 2 else SHAPE
        graph.add(TensorValue(name, dtype, shape, storage, anchor=name if storage in ("input", "output") else None,
                              weight_key=name if storage == "weight" else None))
    graph.steps = steps
    return graph


def _conv(name: str, x: str, y: str, total: Optional[str] = None, bias: bool = True) -> KernelStep:
    inputs = [x, "W"] + (["B"] if bias else []) + ([total] if total else [])
    return KernelStep("NchwcConv", name, inputs, [y], {"group": 1, "has_bias": int(bias), "has_sum": int(bool(total))})


def _unary(name: str, x: str, y: str, op: str = "Relu") -> KernelStep:
    return KernelStep(op, name, [x], [y], {})


def _tensors(dtype="float32", **extra) -> Dict[str, tuple]:
    t = {"X": ("input", dtype), "W": ("weight", dtype, (4, 4, 1, 1, 8, 8)), "B": ("weight", "float32", (32,)),
         "O": ("output", dtype)}
    t.update(extra)
    return t


def test_residual_block_takes_the_sum_bytes_and_chains():
    # s0 = relu(X); block 1: a = conv(s0), y1 = conv(a) + s0; block 2: b = conv(y1), y2 = conv(b) + y1
    steps = [_unary("r", "X", "s0"), _conv("c1", "s0", "a"), _conv("c2", "a", "y1", "s0"),
             _conv("c3", "y1", "b"), _conv("c4", "b", "y2", "y1"), _unary("out", "y2", "O")]
    graph = _graph(_tensors(s0=("arena", "float32"), a=("arena", "float32"), y1=("arena", "float32"),
                            b=("arena", "float32"), y2=("arena", "float32")), steps)
    plan = plan_arena(graph)
    assert plan.in_place == {"y1": 3, "y2": 3}
    assert plan.aliases == {"y1": ("s0", 0), "y2": ("y1", 0)}
    assert plan.offsets["y1"] == plan.offsets["s0"] and plan.offsets["y2"] == plan.offsets["s0"]
    # two buffers of one tensor each (the chain s0 / y1 / y2 and a / b) instead of three
    assert plan.size == 2 * graph.tensors["s0"].nbytes
    check_plan(graph, plan)


def test_sum_without_bias_is_input_2():
    steps = [_unary("r", "X", "s"), _unary("t", "X", "a"), _conv("c", "a", "y", "s", bias=False),
             _unary("out", "y", "O")]
    graph = _graph(_tensors(s=("arena", "float32"), a=("arena", "float32"), y=("arena", "float32")), steps)
    plan = plan_arena(graph)
    assert plan.in_place == {"y": 2} and plan.offsets["y"] == plan.offsets["s"]
    check_plan(graph, plan)


def _not_taken(graph: LoweredGraph, y: str = "y", total: str = "s") -> None:
    plan = plan_arena(graph)
    assert plan.in_place == {} and y not in plan.aliases
    if graph.tensors[total].storage == "arena" and graph.tensors[y].storage == "arena":
        assert plan.offsets[y] != plan.offsets[total]
    check_plan(graph, plan)


def test_not_taken_when_the_sum_is_read_later():
    steps = [_unary("r", "X", "s"), _unary("t", "X", "a"), _conv("c", "a", "y", "s"),
             KernelStep("Add", "add", ["y", "s"], ["O"], {})]
    _not_taken(_graph(_tensors(s=("arena", "float32"), a=("arena", "float32"), y=("arena", "float32")), steps))


def test_not_taken_when_the_sum_is_a_graph_input_or_y_a_graph_output():
    steps = [_unary("t", "X", "a"), _conv("c", "a", "y", "X"), _unary("out", "y", "O")]
    _not_taken(_graph(_tensors(a=("arena", "float32"), y=("arena", "float32")), steps), total="X")
    steps = [_unary("r", "X", "s"), _unary("t", "X", "a"), _conv("c", "a", "O", "s")]
    _not_taken(_graph(_tensors(s=("arena", "float32"), a=("arena", "float32")), steps), y="O")


def test_not_taken_when_the_sum_is_also_x():
    steps = [_unary("r", "X", "s"), _conv("c", "s", "y", "s"), _unary("out", "y", "O")]
    _not_taken(_graph(_tensors(s=("arena", "float32"), y=("arena", "float32")), steps))


def test_not_taken_when_the_sum_is_a_view_or_has_views():
    # the Sum is a Reshape's output (a view of r's bytes)
    steps = [_unary("r", "X", "r0", "Relu"), KernelStep("Reshape", "v", ["r0"], ["s"], {}),
             _unary("t", "X", "a"), _conv("c", "a", "y", "s"), _unary("out", "y", "O")]
    graph = _graph(_tensors(r0=("arena", "float32", (1, 32, 7, 7)), s=("arena", "float32"),
                            a=("arena", "float32"), y=("arena", "float32")), steps)
    plan = plan_arena(graph)
    assert plan.aliases == {"s": ("r0", 0)} and plan.in_place == {}
    check_plan(graph, plan)
    # the Sum is the root of a Reshape view read after the convolution
    steps = [_unary("r", "X", "s"), KernelStep("Reshape", "v", ["s"], ["sv"], {}), _unary("t", "X", "a"),
             _conv("c", "a", "y", "s"), KernelStep("Add", "add", ["y", "sv"], ["O"], {})]
    graph = _graph(_tensors(s=("arena", "float32"), sv=("arena", "float32", (1, 32, 7, 7)),
                            a=("arena", "float32"), y=("arena", "float32")), steps)
    plan = plan_arena(graph)
    assert plan.aliases == {"sv": ("s", 0)} and plan.in_place == {}
    check_plan(graph, plan)


def test_not_taken_for_another_dtype_or_size():
    steps = [_unary("r", "X", "s"), _unary("t", "X", "a"), _conv("c", "a", "y", "s"), _unary("out", "y", "O")]
    _not_taken(_graph(_tensors(s=("arena", "float16"), a=("arena", "float32"), y=("arena", "float32")), steps))
    _not_taken(_graph(_tensors(s=("arena", "float32", (1, 8, 7, 7, 8)), a=("arena", "float32"),
                               y=("arena", "float32")), steps))


def test_not_taken_for_a_depthwise_convolution():
    step = _conv("c", "a", "y", "s")
    step.attrs["group"] = 32
    steps = [_unary("r", "X", "s"), _unary("t", "X", "a"), step, _unary("out", "y", "O")]
    _not_taken(_graph(_tensors(s=("arena", "float32"), a=("arena", "float32"), y=("arena", "float32")), steps))
