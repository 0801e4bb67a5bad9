"""Static memory plan of one LoweredGraph's activation arena.

Each arena tensor lives from the step producing it to the last step reading it (inclusive, so
a step's outputs never share bytes with its inputs, but for the in-place Sum below). Views share
bytes instead of copying:
- a Reshape whose input and output are both in the arena: the output takes its input's bytes;
- a Concat input whose slice of the output is one contiguous byte range (every output dim before
  the axis is 1: a batch-1 NCHWc channel concat) at a 64-byte aligned offset: the producer of
  the input writes straight into its slice, and the Concat kernel skips it. Only an input
  written by a kernel step of the same program, not yet a view itself (of a Reshape, or of an
  earlier Concat that read it) and listed once; others are copied. Chains resolve
  transitively (DenseNet: concat_k = Concat(concat_k-1, x_k) puts a dense block's features in
  one buffer).
- an in-place Sum: a regular NchwcConv's Y takes the bytes of its residual Sum (the peers'
  Conv+Add in place: Y's stores then hit the lines the Sum read brought in, and half the bytes
  are live) when the Sum's whole buffer is dead after the step: the Sum has Y's dtype and byte
  size, is listed once by the step (not also its X), is no Reshape or Concat view and is the
  root of none (its buffer is itself plus earlier in-place Sums: ResNet's chain of blocks), and
  no member of that buffer is used after the step; Y is no view either. The step is emitted
  with `in_place_input` (the Sum's index), which lets the runtime's plan check and the kernel
  (which then reads each Sum pixel before it stores that pixel of Y) accept the aliasing.
A view and the tensor whose bytes it uses form one buffer, owned by the outermost tensor (the
root), live from the first use of any member to the last. Buffers are placed greedily,
largest first, at the lowest 64-byte aligned offset that does not overlap any already placed
buffer whose lifetime overlaps its own. A loop body's pinned tensors (below) are never views:
a view's bytes are only kept while its root's buffer is, not for the whole body.

Control flow (If/Loop steps, compiler/lowering/control_flow.py) is planned from the inside out:
each sub-program gets its own plan over the tensors it defines (step indices are its own; a
loop body's `pinned` tensors — formal inputs and results, which the Loop step writes and reads
around every iteration — live through the whole body), and the sub-program's arena becomes one
block that the enclosing program sees as a buffer used by the control step only (the two
branches of an If share their block: one of them runs). The control step's inputs and outputs
are enclosing-program tensors used at that step, so everything a body reads from outside stays
alive, and untouched, for the whole If or loop.
"""
import dataclasses
import math
from typing import Dict, List, Set, Tuple

from compiler.lowering.ir import ControlStep, KernelStep, LoweredGraph
from popef.format import ALIGNMENT, align_up


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
    aliases: Dict[str, Tuple[str, int]]  # view tensor -> (the tensor whose bytes it uses, byte offset in them)
    # in-place output -> index of its step's input whose bytes it takes (also in `aliases`)
    in_place: Dict[str, int] = dataclasses.field(default_factory=dict)


def plan_arena(graph: LoweredGraph) -> ArenaPlan:
    arena = {n for n, t in graph.tensors.items() if t.storage == "arena"}
    offsets: Dict[str, int] = {}
    aliases: Dict[str, Tuple[str, int]] = {}
    in_place: Dict[str, int] = {}
    buffers, size = _plan_program(graph, graph.steps, arena, [], set(), offsets, aliases, in_place)
    for n in arena:
        offsets.setdefault(n, 0)  # an arena tensor no step uses
    return ArenaPlan(dict(sorted(offsets.items())), buffers, size, aliases, in_place)


def _plan_program(graph: LoweredGraph, steps: List[KernelStep], arena: Set[str], pinned: List[str],
                  outer: Set[str], offsets: Dict[str, int],
                  aliases: Dict[str, Tuple[str, int]], in_place: Dict[str, int]) -> Tuple[List[Buffer], int]:
    """Plans the arena tensors `steps` define (outputs, plus `pinned`), minus those of enclosing
    programs (`outer`). Fills `offsets` (relative to this program's block), `aliases` and
    `in_place`."""
    pinned_set = {n for n in pinned if n in arena and n not in outer}
    own = {o for step in steps for o in step.outputs if o in arena and o not in outer} | pinned_set
    views = _views(graph, steps, own - pinned_set)
    _in_place_sums(graph, steps, own - pinned_set, views, in_place)
    root = {n: _root(n, views) for n in own}  # tensor -> (root, byte offset in the root)
    first: Dict[str, int] = {}
    last: Dict[str, int] = {}
    for name in pinned_set:
        first[name], last[name] = 0, max(len(steps) - 1, 0)
    for i, step in enumerate(steps):
        for name in step.inputs + step.outputs:
            if name in own:
                r = root[name][0]
                first[r] = min(first.get(r, i), i)
                last[r] = max(last.get(r, i), i)
    buffers = [Buffer(r, align_up(graph.tensors[r].nbytes), first[r], last[r]) for r in first]
    blocks = []  # (buffer, offsets of the tensors inside it)
    inner_scope = outer | own
    for i, step in enumerate(steps):
        if not isinstance(step, ControlStep):
            continue
        inner: Dict[str, int] = {}
        block_size = 0
        for role, program in step.programs.items():
            _, size = _plan_program(graph, program, arena, step.pinned, inner_scope, inner, aliases, in_place)
            block_size = max(block_size, size)
        block = Buffer(f"<{step.op} '{step.name}' sub-programs>", align_up(block_size), i, i)
        buffers.append(block)
        blocks.append((block, inner))
    _place(buffers)
    offset_of = {b.root: b.offset for b in buffers}
    for n in own:
        r, offset = root[n]
        offsets[n] = offset_of.get(r, 0) + offset
    aliases.update(views)
    for block, inner in blocks:
        for n, off in inner.items():
            offsets[n] = block.offset + off
    size = max((b.offset + b.size for b in buffers), default=0)
    return buffers, size


def _views(graph: LoweredGraph, steps: List[KernelStep], viewable: Set[str]) -> Dict[str, Tuple[str, int]]:
    """View tensor -> (the tensor whose bytes it uses, byte offset in them), among `viewable`."""
    views: Dict[str, Tuple[str, int]] = {}
    written_by_kernel = {o for step in steps if not isinstance(step, ControlStep) for o in step.outputs}
    for step in steps:
        if isinstance(step, ControlStep) or not step.outputs or step.outputs[0] not in viewable:
            continue
        out = step.outputs[0]
        if step.op == "Reshape" and step.inputs[0] in viewable:
            if graph.tensors[step.inputs[0]].nbytes == graph.tensors[out].nbytes:
                views[out] = (step.inputs[0], 0)
        elif step.op == "Concat" and math.prod(graph.tensors[out].shape[:step.attrs["axis"]]) == 1:
            offset = 0
            for name in step.inputs:
                if (name in viewable and name in written_by_kernel and name not in views
                        and step.inputs.count(name) == 1 and offset % ALIGNMENT == 0):
                    views[name] = (out, offset)
                offset += graph.tensors[name].nbytes
    return views


def _in_place_sums(graph: LoweredGraph, steps: List[KernelStep], viewable: Set[str],
                   views: Dict[str, Tuple[str, int]], in_place: Dict[str, int]) -> None:
    """Adds the in-place Sums (module docstring) to `views` (Y -> (Sum, 0)) and `in_place`."""
    last: Dict[str, int] = {}
    writes: Dict[str, int] = {}
    for i, step in enumerate(steps):
        for name in step.inputs + step.outputs:
            last[name] = i
        for name in step.outputs:
            writes[name] = writes.get(name, 0) + 1
    targets = {target for target, _ in views.values()}  # roots of Reshape / Concat views
    chains: Dict[str, List[str]] = {}  # the first Sum of an in-place chain -> the chain
    for i, step in enumerate(steps):
        if (isinstance(step, ControlStep) or step.op != "NchwcConv" or not step.attrs.get("has_sum")
                or step.attrs.get("group", 1) != 1 or not step.outputs):
            continue
        index = 3 if step.attrs.get("has_bias") else 2
        y, total = step.outputs[0], step.inputs[index]
        if (y not in viewable or total not in viewable or y in views or y in targets or total in targets
                or (total in views and total not in in_place) or step.inputs.count(total) != 1
                or writes.get(y) != 1 or writes.get(total) != 1):
            continue
        ty, ts = graph.tensors[y], graph.tensors[total]
        if ty.dtype != ts.dtype or ty.nbytes != ts.nbytes:
            continue
        first = _root(total, views)[0]
        chain = chains.get(first, [first])
        if any(last[n] > i for n in chain):
            continue  # the Sum (or an earlier member of its buffer) is read later
        views[y] = (total, 0)
        in_place[y] = index
        chains[first] = chain + [y]


def _root(name: str, views: Dict[str, Tuple[str, int]]) -> Tuple[str, int]:
    """The tensor owning `name`'s bytes and `name`'s byte offset in them. A Reshape view points
    to an earlier tensor, a Concat input to a later one that is never a Reshape output, so the
    chain has no cycle."""
    offset = 0
    while name in views:
        name, step_offset = views[name]
        offset += step_offset
    return name, offset


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
