"""Independent check of an arena plan: recomputes lifetimes from the steps and verifies that
tensors alive at the same time never share bytes unless one is a view of the other (a Reshape
output on its input's bytes, a Concat input on its slice of the output, an NchwcConv's Y on its
residual Sum's bytes when everything already in that buffer dies at the step), and that every
view sits where its step says."""
import math

from compiler.lowering.ir import KernelStep, LoweredGraph
from compiler.lowering.memory_plan import ArenaPlan


def view_root(plan: ArenaPlan, name: str) -> str:
    while name in plan.aliases:
        name = plan.aliases[name][0]
    return name


def check_views(steps, graph: LoweredGraph, plan: ArenaPlan) -> None:
    """Each alias is a Reshape output at its input's offset, or a Concat input at its slice."""
    def all_steps(program):
        for step in program:
            yield step
            for sub in getattr(step, "programs", {}).values():
                yield from all_steps(sub)

    expected = {}
    for step in all_steps(steps):
        if step.op == "Reshape" and type(step) is KernelStep:
            expected[(step.outputs[0], step.inputs[0])] = 0
        elif step.op == "NchwcConv" and step.outputs and step.outputs[0] in plan.in_place:
            index = plan.in_place[step.outputs[0]]
            assert step.attrs.get("has_sum") and index == (3 if step.attrs.get("has_bias") else 2), step.name
            expected[(step.outputs[0], step.inputs[index])] = 0
        elif step.op == "Concat" and math.prod(graph.tensors[step.outputs[0]].shape[:step.attrs["axis"]]) == 1:
            offset = 0
            for name in step.inputs:
                expected.setdefault((name, step.outputs[0]), offset)
                offset += graph.tensors[name].nbytes
    for view, (target, offset) in plan.aliases.items():
        assert expected.get((view, target)) == offset, (view, target, offset)
        assert plan.offsets[view] == plan.offsets[target] + offset, (view, target)


def check_plan(graph: LoweredGraph, plan: ArenaPlan) -> None:
    check_views(graph.steps, graph, plan)
    arena = [n for n, t in graph.tensors.items() if t.storage == "arena"]
    live = {}
    for i, step in enumerate(graph.steps):
        for name in step.inputs + step.outputs:
            if name in graph.tensors and graph.tensors[name].storage == "arena":
                lo, hi = live.get(name, (i, i))
                live[name] = (min(lo, i), max(hi, i))

    # An in-place Y overwrites its buffer: whatever the buffer held before the step is dead after it.
    for i, step in enumerate(graph.steps):
        if step.outputs and step.outputs[0] in plan.in_place:
            root = view_root(plan, step.outputs[0])
            for name in arena:
                if view_root(plan, name) == root and live[name][0] < i:
                    assert live[name][1] <= i, f"{name} is read after {step.outputs[0]} took its bytes"
    for name in arena:
        off = plan.offsets[name]
        assert off % 64 == 0, (name, off)
        assert off + graph.tensors[name].nbytes <= plan.size, (name, off, plan.size)
    for i, a in enumerate(arena):
        for b in arena[i + 1:]:
            if view_root(plan, a) == view_root(plan, b):
                continue  # one buffer: check_views placed each view on its own bytes
            # a view keeps its root's bytes alive: use the group's lifetime
            ga = [n for n in arena if view_root(plan, n) == view_root(plan, a)]
            gb = [n for n in arena if view_root(plan, n) == view_root(plan, b)]
            a0, a1 = min(live[n][0] for n in ga), max(live[n][1] for n in ga)
            b0, b1 = min(live[n][0] for n in gb), max(live[n][1] for n in gb)
            if a0 <= b1 and b0 <= a1:
                sa, sb = graph.tensors[a].nbytes, graph.tensors[b].nbytes
                if sa and sb:
                    oa, ob = plan.offsets[a], plan.offsets[b]
                    assert oa + sa <= ob or ob + sb <= oa, f"{a} and {b} overlap while both alive"
