"""Static memory plan of one LoweredGraph's activation arena.

Each arena tensor lives from the step producing it to the last step reading it (inclusive, so
a step's outputs never share bytes with its inputs). A Reshape whose input and output are both
in the arena is a view: the output takes its input's bytes, which then live until the last
reader of either. Buffers are placed greedily, largest first, at the lowest 64-byte aligned
offset that does not overlap any already placed buffer whose lifetime overlaps its own.
"""
import dataclasses
from typing import Dict, List

from compiler.lowering.ir import LoweredGraph
from compiler.popef.format import align_up


@dataclasses.dataclass
class Buffer:
    root: str       # the tensor owning the bytes; views of it share them
    size: int       # 64-aligned bytes
    first: int      # first step using it
    last: int       # last step using it
    offset: int = 0


@dataclasses.dataclass
class ArenaPlan:
    offsets: Dict[str, int]          # every arena tensor -> its offset
    buffers: List[Buffer]
    size: int                        # arena bytes this graph needs
    aliases: Dict[str, str]          # view tensor -> the tensor whose bytes it uses


def plan_arena(graph: LoweredGraph) -> ArenaPlan:
    arena = {n for n, t in graph.tensors.items() if t.storage == "arena"}
    root: Dict[str, str] = {n: n for n in arena}
    for step in graph.steps:
        if step.op == "Reshape" and step.inputs[0] in arena and step.outputs[0] in arena:
            src, dst = step.inputs[0], step.outputs[0]
            if graph.tensors[src].nbytes == graph.tensors[dst].nbytes:
                root[dst] = root[src]  # inputs are produced earlier, so root[src] is final
    first: Dict[str, int] = {}
    last: Dict[str, int] = {}
    for i, step in enumerate(graph.steps):
        for name in step.inputs + step.outputs:
            if name in arena:
                r = root[name]
                first.setdefault(r, i)
                last[r] = i
    buffers = [Buffer(r, align_up(graph.tensors[r].nbytes), first[r], last[r]) for r in first]
    _place(buffers)
    offset_of = {b.root: b.offset for b in buffers}
    offsets = {n: offset_of.get(root[n], 0) for n in sorted(arena)}
    size = max((b.offset + b.size for b in buffers), default=0)
    aliases = {n: r for n, r in root.items() if n != r}
    return ArenaPlan(offsets, buffers, size, aliases)


def _place(buffers: List[Buffer]) -> None:
    placed: List[Buffer] = []
    for buf in sorted(buffers, key=lambda b: (-b.size, b.first, b.root)):
        if buf.size:
            live = sorted((p for p in placed if p.first <= buf.last and buf.first <= p.last and p.size),
                          key=lambda p: p.offset)
            offset = 0
            for other in live:
                if offset + buf.size <= other.offset:
                    break
                offset = max(offset, other.offset + other.size)
            buf.offset = offset
        placed.append(buf)
