"""Lowering of run-time If/Loop into ControlSteps with sub-programs: the memory plan (checked
independently over a flattened timeline of every program), the emitted step fields, fusion of a
model with control flow, and the errors for branches or bodies that cannot be static."""
import numpy as np
import pytest

from compiler import Compiler
from compiler.converter import Converter
from compiler.fusion import FusionEntry
from compiler.lowering.ir import ControlStep
from compiler.lowering.memory_plan import plan_arena
from compiler.lowering.weights import WeightStore
from compiler_test_helpers import fuse_and_lower
from plan_checks import check_views, view_root
from tests.compiler import control_flow_models as models


def lowered(model):
    converted = Converter().convert(model)
    graph = fuse_and_lower(converted, WeightStore(), "test.onnx")
    return graph, plan_arena(graph)


def timeline(graph):
    """Each arena tensor's [first, last] time on one timeline through every program: a control
    step spans its sub-programs' steps, its operands (and everything a body reads from outside)
    live across that span, a loop body's pinned tensors across the whole body."""
    live = {}
    clock = [0]

    def use(name, lo, hi):
        if graph.tensors[name].storage == "arena":
            a, b = live.get(name, (lo, hi))
            live[name] = (min(a, lo), max(b, hi))

    def visit(steps, pinned):
        start = clock[0]
        for step in steps:
            begin = clock[0]
            if isinstance(step, ControlStep):
                for program in step.programs.values():
                    visit(program, step.pinned)
            clock[0] += 1
            for name in step.inputs + step.outputs:
                use(name, begin, clock[0] - 1)
        for name in pinned:
            use(name, start, max(clock[0] - 1, start))

    visit(graph.steps, [])
    return live


def check_nested_plan(graph, plan):
    live = timeline(graph)
    check_views(graph.steps, graph, plan)
    root = lambda n: view_root(plan, n)

    names = sorted(live)
    group = {}  # a view keeps its root's bytes: each tensor lives as long as its whole group
    for name in names:
        lo, hi = group.get(root(name), live[name])
        group[root(name)] = (min(lo, live[name][0]), max(hi, live[name][1]))
    for name in names:
        assert plan.offsets[name] % 64 == 0
        assert plan.offsets[name] + graph.tensors[name].nbytes <= plan.size, name
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if root(a) == root(b):
                continue
            (a0, a1), (b0, b1) = group[root(a)], group[root(b)]
            sa, sb = graph.tensors[a].nbytes, graph.tensors[b].nbytes
            if a0 <= b1 and b0 <= a1 and sa and sb:
                oa, ob = plan.offsets[a], plan.offsets[b]
                assert oa + sa <= ob or ob + sb <= oa, f"{a} {live[a]} and {b} {live[b]} overlap while both alive"


@pytest.mark.parametrize("build", [models.if_model, models.while_model, models.run_time_trip_count_model,
                                   models.if_in_loop_model, models.loop_result_viewing_a_body_tensor_model])
def test_nested_memory_plan_never_overlaps_live_tensors(build):
    graph, plan = lowered(build())
    assert any(isinstance(s, ControlStep) for s in graph.steps)
    check_nested_plan(graph, plan)


def test_if_branches_share_one_block_and_copy_into_the_if_output():
    graph, plan = lowered(models.if_model())
    step = next(s for s in graph.steps if isinstance(s, ControlStep))
    assert set(step.programs) == {"then", "else"}
    for role, program in step.programs.items():
        assert program[-1].op == "Reshape" and program[-1].outputs == ["y"]
    then_local = step.programs["then"][0].outputs[0]
    else_local = step.programs["else"][0].outputs[0]
    assert plan.offsets[then_local] == plan.offsets[else_local]  # only one branch runs
    assert step.inputs[0] == "c" and "x" in step.inputs  # the branches read x from outside


def test_loop_body_results_never_share_bytes_with_its_inputs():
    graph, plan = lowered(models.if_in_loop_model())
    step = next(s for s in graph.steps if isinstance(s, ControlStep))
    carried = step.tensor_attrs["carried"]
    body_ins = {c[1] for c in carried}
    results = {c[2] for c in carried}
    assert not body_ins & results  # the swapped a/b results got copies of their own
    spans = {n: (plan.offsets[n], plan.offsets[n] + graph.tensors[n].nbytes) for n in body_ins | results}
    for a in body_ins:
        for b in results:
            assert spans[a][1] <= spans[b][0] or spans[b][1] <= spans[a][0]


def test_emitted_loop_step_fields():
    executable = Compiler.compile(models.while_model().SerializeToString())
    ex = executable.executable
    assert ex["version"] == 2
    step = ex["programs"]["main"][0]
    ids = {t["name"]: t["id"] for t in ex["tensors"]}
    assert step["op"] == "Loop" and step["body"] == "main/the_while/body"
    assert step["max_trip_count"] == 50 and step["trip_count"] == -1 and step["cond"] == -1
    assert step["carried"][0][0] == ids["h0"] and step["carried"][0][3] == ids["h_final"]
    assert step["scan_outputs"] == []
    assert "attrs" not in step


def test_fused_executable_with_control_flow_runs_each_subgraph():
    from tf_popef_op import runtime
    from tests.compiler.compiler_test_helpers import ort_run
    model = models.if_model()
    exe = Compiler.compile_fused([FusionEntry(model), FusionEntry(models.while_model())])
    programs = exe.executable["programs"]
    assert "graph0/graph0/the_if/then" in programs and "graph1/graph1/the_while/body" in programs
    x = np.linspace(-1, 2, 6, dtype=np.float32).reshape(2, 3)
    with runtime.ModelRunner(exe) as runner:
        out = runner.execute({"graph0/stream0": x, "index": np.array([0], np.int32)})
        np.testing.assert_allclose(out["graph0/z"], ort_run(model, {"x": x})[0], rtol=1e-6)
        xw = np.full((2, 2), 0.3, np.float32)
        out = runner.execute({"graph1/stream0": xw, "graph1/stream1": np.array(2.0, np.float32),
                              "index": np.array([1], np.int32)})
        want = ort_run(models.while_model(), {"x": xw, "limit": np.array(2.0, np.float32)})
        np.testing.assert_allclose(out["graph1/h_final"], want[0], rtol=1e-6)


def test_loop_body_using_an_unsupported_op_names_the_body_and_op():
    model = models.while_model()
    body = model.graph.node[0].attribute[0].g
    body.node[0].op_type = "Mod"
    with pytest.raises(Exception, match=r"Loop 'the_while' body\): unsupported op 'Mod'"):
        Compiler.compile(model.SerializeToString())
