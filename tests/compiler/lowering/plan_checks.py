"""Independent check of an arena plan: recomputes lifetimes from the steps and verifies that
tensors alive at the same step never share bytes unless one is a view of the other."""
from compiler.lowering.ir import LoweredGraph
from compiler.lowering.memory_plan import ArenaPlan


def check_plan(graph: LoweredGraph, plan: ArenaPlan) -> None:
    arena = [n for n, t in graph.tensors.items() if t.storage == "arena"]
    live = {}
    for i, step in enumerate(graph.steps):
        for name in step.inputs + step.outputs:
            if name in graph.tensors and graph.tensors[name].storage == "arena":
                lo, hi = live.get(name, (i, i))
                live[name] = (min(lo, i), max(hi, i))

    def root(n):
        while n in plan.aliases:
            n = plan.aliases[n]
        return n

    for name in arena:
        off = plan.offsets[name]
        assert off % 64 == 0, (name, off)
        assert off + graph.tensors[name].nbytes <= plan.size, (name, off, plan.size)
    for i, a in enumerate(arena):
        for b in arena[i + 1:]:
            if root(a) == root(b):
                assert plan.offsets[a] == plan.offsets[b]
                continue
            (a0, a1), (b0, b1) = live[a], live[b]
            # a view keeps its root's bytes alive: use the group's lifetime
            ga = [n for n in arena if root(n) == root(a)]
            gb = [n for n in arena if root(n) == root(b)]
            a0, a1 = min(live[n][0] for n in ga), max(live[n][1] for n in ga)
            b0, b1 = min(live[n][0] for n in gb), max(live[n][1] for n in gb)
            if a0 <= b1 and b0 <= a1:
                sa, sb = graph.tensors[a].nbytes, graph.tensors[b].nbytes
                if sa and sb:
                    oa, ob = plan.offsets[a], plan.offsets[b]
                    assert oa + sa <= ob or ob + sb <= oa, f"{a} and {b} overlap while both alive"
