"""Run-time If and Loop -> a ControlStep whose bodies are sub-programs (docs/popef.md §3
"Control flow"). The converter (unroll_control_flow) already unrolled/inlined every Loop and If
decided at compile time; what reaches the lowering is decided by a tensor's value at run time.

Each body (If branch, Loop body) becomes a standalone model (onnx_graph/subgraph_model.py) with
its local tensors renamed `<node>/<role>/<name>` so that they are unique in the LoweredGraph,
prepared by the compile step's `prepare_body` function (the converter's constant_folding,
unroll_control_flow for the static control flow it holds, strict shape inference) and lowered by
the same rules into the sub-program's steps. Tensor names, and so the emitted tensor ids, are
shared by all programs of a graph: a sub-program reads the enclosing program's tensors directly.

- If: both branches end with a copy of each branch result into the If's output tensor, so the
  If's outputs are written whichever branch runs (their types must agree: static program).
- Loop: the body's formal inputs (iter_num, cond_in, carried values) are arena tensors the Loop
  step writes before each iteration; the body's results (cond_out, carried, scan items) are
  tensors produced by the body's own steps (a copy is added when a result is an input, an outer
  tensor or a constant, so results never share bytes with the formal inputs the step copies them
  into). All of these are `pinned`: the memory plan keeps them for the whole body.
"""
from typing import Callable, List, Optional, Sequence, Set

import numpy as np
import onnx
from onnx import TensorProto

from compiler.errors import LoweringError
from compiler.lowering.ir import ControlStep, KernelStep, TensorValue
from compiler.onnx_graph.graph_edit import outer_references
from compiler.onnx_graph.subgraph_model import body_model, rename_locals, scalar_type
from compiler.onnx_graph.tensor_types import TensorType

# (body model, where) -> the body ready to lower: folded, static control flow unrolled, shapes
# inferred. The compile step passes the converter's prepare_control_flow_body.
PrepareBody = Callable[[onnx.ModelProto, str], onnx.ModelProto]


def lower_control_flow(lowerer, node: onnx.NodeProto, anchors: Sequence[str]) -> ControlStep:
    """`lowerer` is the _GraphLowerer of the enclosing program; `anchors` its output anchor names."""
    return (_lower_if if node.op_type == "If" else _lower_loop)(lowerer, node, set(anchors))


def _where(lowerer, node) -> str:
    return f"{lowerer.model_name}: node '{node.name}' ({node.op_type})"


def _outer_tensor(lowerer, name: str, node, what: str) -> str:
    """`name` as a tensor of the enclosing program (a constant becomes a weight)."""
    if name not in lowerer.lowered.tensors:
        if name not in lowerer.constants:
            raise LoweringError(f"{_where(lowerer, node)}: {what} '{name}' is read before any step produces it")
        lowerer._weight(name)
    return name


def _add_result(lowerer, node, name: str, t: TensorType, anchors: Set[str]) -> None:
    storage = "output" if name in anchors else "arena"
    lowerer.lowered.add(TensorValue(name, t.dtype_name, tuple(t.shape), storage,
                                    anchor=name if storage == "output" else None))


def _unique_prefix(lowerer, node, role: str) -> str:
    base = f"{node.name or node.op_type}/{role}/"
    prefix, k = base, 0
    names = lowerer.lowered.tensors
    while any(n.startswith(prefix) for n in names):
        k += 1
        prefix = f"{node.name or node.op_type}#{k}/{role}/"
    return prefix


class _Body:
    """One lowered sub-program: its steps, formal inputs, results and outer reads."""

    def __init__(self, lowerer, node, graph: onnx.GraphProto, role: str, input_types: List[TensorType]):
        self.node = node
        copy = onnx.GraphProto()
        copy.CopyFrom(graph)
        self.prefix = _unique_prefix(lowerer, node, role)
        rename_locals(copy, self.prefix)
        for i, n in enumerate(copy.node):  # step names say which body they run in
            n.name = self.prefix + (n.name or f"{n.op_type}_{i}")
        refs = outer_references(copy)
        constants = {n: lowerer.constants.value(n) for n in refs if n in lowerer.constants}
        model = body_model(copy, input_types, lowerer.types, constants, lowerer.opset_import, lowerer.ir_version)
        where = f"{lowerer.model_name} ({node.op_type} '{node.name}' {role})"
        if lowerer.prepare_body is None:
            raise LoweringError(f"{_where(lowerer, node)}: a run-time {node.op_type} needs its {role} prepared "
                                f"for lowering; lower the model with a prepare_body function")
        model = lowerer.prepare_body(model, where)
        self.formals = [i.name for i in copy.input]
        self.results = [o.name for o in model.graph.output]
        sub = lowerer.body_lowerer(model, where)
        self.lowerer = sub
        self.steps: List[KernelStep] = sub.lower_body(self.formals)

    def produced(self) -> Set[str]:
        return {o for s in self.steps for o in s.outputs}

    def result_tensor(self, name: str) -> str:
        """A tensor holding body result `name`: the result itself, or a weight for a constant."""
        if name not in self.lowerer.lowered.tensors:
            if name not in self.lowerer.constants:
                raise LoweringError(f"{self.lowerer.model_name}: body result '{name}' is not produced by any node "
                                    f"and is neither an input nor a constant")
            self.lowerer._weight(name)
        return name

    def outer_reads(self, local: Set[str]) -> List[str]:
        """Tensors of the enclosing programs the steps read (weights left out: they are not
        planned)."""
        tensors = self.lowerer.lowered.tensors
        produced = self.produced() | local
        found: List[str] = []
        for s in self.steps:
            for name in s.inputs:
                if name not in produced and name not in found and tensors[name].storage != "weight":
                    found.append(name)
        return found


def _check_same_type(lowerer, node, out: str, role: str, got: TensorValue, want: TensorValue) -> None:
    if got.dtype != want.dtype or tuple(got.shape) != tuple(want.shape):
        raise LoweringError(f"{_where(lowerer, node)}: output '{out}' is {want.dtype} {list(want.shape)} but "
                            f"{role} produces {got.dtype} {list(got.shape)}; a run-time {node.op_type} runs as a "
                            f"static program, so these must agree")


def _lower_if(lowerer, node, anchors: Set[str]) -> ControlStep:
    cond = _outer_tensor(lowerer, node.input[0], node, "condition")
    cond_t = lowerer.lowered.tensors[cond]
    if cond_t.dtype != "bool" or int(np.prod(cond_t.shape, dtype=np.int64)) != 1:
        raise LoweringError(f"{_where(lowerer, node)}: condition '{cond}' must be one bool, got {cond_t.dtype} "
                            f"{list(cond_t.shape)}")
    attrs = {a.name: a.g for a in node.attribute}
    bodies = {role: _Body(lowerer, node, attrs[f"{role}_branch"], role, []) for role in ("then", "else")}
    outputs = [o for o in node.output if o]
    for role, body in bodies.items():
        if len(body.results) != len(node.output):
            raise LoweringError(f"{_where(lowerer, node)}: {role}_branch has {len(body.results)} outputs, the node "
                                f"{len(node.output)}")
    for i, out in enumerate(node.output):
        if not out:
            continue
        then_name = bodies["then"].result_tensor(bodies["then"].results[i])
        else_name = bodies["else"].result_tensor(bodies["else"].results[i])
        tensors = lowerer.lowered.tensors
        a, b = tensors[then_name], tensors[else_name]
        if a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape):
            raise LoweringError(f"{_where(lowerer, node)}: output '{out}' is {a.dtype} {list(a.shape)} in "
                                f"then_branch but {b.dtype} {list(b.shape)} in else_branch; a run-time If runs as a "
                                f"static program, so both branches must produce the same static shape and dtype")
        t = lowerer._runtime_type(out, f"output of node '{node.name}' (If)")
        _add_result(lowerer, node, out, t, anchors)
        for role, src in (("then", then_name), ("else", else_name)):
            _check_same_type(lowerer, node, out, f"{role}_branch", tensors[src], tensors[out])
            bodies[role].steps.append(KernelStep("Reshape", f"{node.name}/{role}:{out}", [src], [out], {}))
    reads: List[str] = [cond]
    for body in bodies.values():
        reads += [n for n in body.outer_reads(set()) if n not in reads and n not in outputs]
    return ControlStep("If", node.name, reads, outputs, {},
                       programs={role: body.steps for role, body in bodies.items()},
                       tensor_attrs={"cond": cond})


def _lower_loop(lowerer, node, anchors: Set[str]) -> ControlStep:
    where = _where(lowerer, node)
    body_graph = next(a.g for a in node.attribute if a.name == "body")
    trip = node.input[0] if len(node.input) > 0 else ""
    cond = node.input[1] if len(node.input) > 1 else ""
    initials = [_outer_tensor(lowerer, n, node, "loop-carried input") for n in node.input[2:]]
    n_carried = len(initials)
    carried_types = [lowerer._runtime_type(n, "loop-carried input") for n in initials]
    max_trips = -1
    trip_tensor: Optional[str] = None
    if trip:
        if trip in lowerer.constants:
            max_trips = int(np.asarray(lowerer.constants.value(trip)).reshape(-1)[0])
        else:
            trip_tensor = _outer_tensor(lowerer, trip, node, "trip count")
    cond_tensor = _outer_tensor(lowerer, cond, node, "condition") if cond else None
    body = _Body(lowerer, node, body_graph, "body",
                 [scalar_type(TensorProto.INT64), scalar_type(TensorProto.BOOL)] + carried_types)
    tensors = lowerer.lowered.tensors
    # Results that are not produced by the body's own steps get a copy of their own.
    produced = body.produced()
    results = []
    for name in body.results:
        src = body.result_tensor(name)
        if src in produced and tensors[src].storage == "arena" and src not in results:
            results.append(src)
            continue
        copy = f"{src}:result"
        k = 0
        while copy in tensors:
            k += 1
            copy = f"{src}:result{k}"
        lowerer.lowered.add(TensorValue(copy, tensors[src].dtype, tensors[src].shape, "arena"))
        body.steps.append(KernelStep("Reshape", f"{node.name}/body:{copy}", [src], [copy], {}))
        results.append(copy)
    cond_out, carried_out, scan_items = results[0], results[1:1 + n_carried], results[1 + n_carried:]
    finals = list(node.output[:n_carried])
    scans = list(node.output[n_carried:])
    for out, initial, result in zip(finals, initials, carried_out):
        if out:
            t = lowerer._runtime_type(out, f"output of node '{node.name}' (Loop)")
            _add_result(lowerer, node, out, t, anchors)
            _check_same_type(lowerer, node, out, "the body", tensors[result], tensors[out])
        _check_same_type(lowerer, node, initial, "the body", tensors[result], tensors[initial])
    if any(scans) and (trip_tensor is not None or max_trips < 0):
        raise LoweringError(f"{where}: scan outputs need a constant trip count (their static length)")
    for out, item in zip(scans, scan_items):
        if not out:
            continue
        t = lowerer._runtime_type(out, f"output of node '{node.name}' (Loop)")
        _add_result(lowerer, node, out, t, anchors)
        want = (max_trips,) + tuple(tensors[item].shape)
        if tuple(t.shape) != want or t.dtype_name != tensors[item].dtype:
            raise LoweringError(f"{where}: scan output '{out}' is {t} but {max_trips} iterations of "
                                f"{tensors[item].dtype} {list(tensors[item].shape)} make {list(want)}")
    formals = body.formals
    pinned = formals + [r for r in results if r not in formals]
    writes = [o for o in finals + scans if o]
    reads = [n for n in ([trip_tensor, cond_tensor] + initials) if n]
    reads = list(dict.fromkeys(reads))
    reads += [n for n in body.outer_reads(set(formals)) if n not in reads and n not in writes]
    tensor_attrs = {
        "trip_count": trip_tensor, "cond": cond_tensor, "iter_num": formals[0], "cond_in": formals[1],
        "cond_out": cond_out,
        "carried": [[initial, formal, result, final or None]
                    for initial, formal, result, final in zip(initials, formals[2:], carried_out, finals + [""] * n_carried)],
        "scan_outputs": [[item, out] for item, out in zip(scan_items, scans) if out],
    }
    return ControlStep("Loop", node.name, reads, writes, {"max_trip_count": max_trips},
                       programs={"body": body.steps}, tensor_attrs=tensor_attrs, pinned=pinned)
