"""Unrolls Loop and inlines If when the decision is known at compile time: what tf2onnx writes
for Keras recurrent layers (a `while` over the time steps becomes a Loop whose trip count and
condition depend only on constants once the input shapes are fixed).

Loop(M, cond, v...) is replaced by one renamed copy of its body per iteration: iteration i sees
iter_num = i, the condition computed by iteration i-1 and the loop-carried values produced by
iteration i-1; its scan outputs are stacked along a new axis 0 (Unsqueeze + Concat). The
condition of each iteration is evaluated while unrolling (only the body nodes it depends on,
which must then have constant inputs), so a loop that stops early unrolls exactly as far as it
runs. If(cond) with a constant cond is replaced by its chosen branch. A Loop or If whose trip
count or condition is computed at run time raises a ConversionError naming the node: the
emulator has no run-time control flow. Nested control flow unrolls from the outside in (the
pass repeats until nothing changes), then constant folding runs over the unrolled graph.
"""
from typing import Dict, List, Optional, Set

import numpy as np
import onnx
from onnx import helper, numpy_helper

from compiler.converter.pass_registry import register
from compiler.converter.passes.constant_folding import _evaluate, constant_folding
from compiler.errors import ConversionError
from compiler.onnx_graph.constants import Constants, constant_node_value, is_constant_node
from compiler.onnx_graph.graph_edit import opset_version, subgraphs

# A Loop without a trip count runs until its condition turns false; beyond this many
# iterations the unrolled graph would be unreasonable for the device anyway.
MAX_UNROLLED_ITERATIONS = 100_000


@register("unroll_control_flow", kind="fold", idempotent=False)
def unroll_control_flow(model, ctx):
    """Unroll Loop / inline If whose trip count and conditions are compile-time constants."""
    graph = model.graph
    targets = [n for n in graph.node if n.op_type in ("Loop", "If") and n.domain in ("", "ai.onnx")]
    if not targets:
        return model
    opsets = {(imp.domain if imp.domain != "ai.onnx" else ""): int(imp.version) for imp in model.opset_import}
    opsets.setdefault("", opset_version(model))
    unroller = _Unroller(model, opsets, ctx.model_name)
    new_nodes: List[onnx.NodeProto] = []
    for node in graph.node:
        if node in targets:
            new_nodes.extend(unroller.loop(node) if node.op_type == "Loop" else unroller.branch(node))
        else:
            new_nodes.append(node)
    del graph.node[:]
    graph.node.extend(new_nodes)
    graph.initializer.extend(unroller.new_initializers)
    return constant_folding(model, ctx)


class _Unroller:
    def __init__(self, model: onnx.ModelProto, opsets: Dict[str, int], model_name: str):
        self.opsets = opsets
        self.opset = opsets[""]
        self.model_name = model_name
        self.constants = Constants(model.graph, self.opset, model_name)
        self.new_initializers: List[onnx.TensorProto] = []
        self.used_names: Set[str] = {t.name for t in model.graph.initializer} | {
            o for n in model.graph.node for o in n.output}

    def where(self, node) -> str:
        return f"{self.model_name}: node '{node.name}' ({node.op_type})"

    def constant(self, name: str) -> Optional[np.ndarray]:
        return self.constants.value(name) if name and name in self.constants else None

    def new_constant(self, base: str, value: np.ndarray) -> str:
        name = self.unique(base)
        self.new_initializers.append(numpy_helper.from_array(np.asarray(value), name))
        self.constants.add(name, np.asarray(value))
        return name

    def unique(self, base: str) -> str:
        name, k = base, 0
        while name in self.used_names:
            k += 1
            name = f"{base}_{k}"
        self.used_names.add(name)
        return name

    # ------------------------------------------------------------------ If
    def branch(self, node: onnx.NodeProto) -> List[onnx.NodeProto]:
        cond = self.constant(node.input[0])
        if cond is None:
            raise ConversionError(f"{self.where(node)}: the condition '{node.input[0]}' is computed at run time; the "
                                  f"emulator has no run-time control flow, so it must fold to a constant (fix the "
                                  f"input shapes so it can)")
        attrs = {a.name: a.g for a in node.attribute}
        body = attrs["then_branch" if bool(np.asarray(cond).reshape(-1)[0]) else "else_branch"]
        mapping: Dict[str, str] = {}
        nodes = self.clone_body(body, mapping, f"{node.name}/")
        nodes += [helper.make_node("Identity", [mapping.get(o.name, o.name)], [out], name=self.unique(f"{out}/if"))
                  for o, out in zip(body.output, node.output) if out]
        return nodes

    # ------------------------------------------------------------------ Loop
    def loop(self, node: onnx.NodeProto) -> List[onnx.NodeProto]:
        body = next(a.g for a in node.attribute if a.name == "body")
        trip_name = node.input[0] if len(node.input) > 0 else ""
        cond_name = node.input[1] if len(node.input) > 1 else ""
        carried = list(node.input[2:])
        n_carried = len(carried)
        n_scan = len(body.output) - 1 - n_carried
        trips = None
        if trip_name:
            value = self.constant(trip_name)
            if value is None:
                raise ConversionError(f"{self.where(node)}: the trip count '{trip_name}' is computed at run time; the "
                                      f"emulator has no run-time loops, so it must fold to a constant (fix the input "
                                      f"shapes with --input_shape/--batch_size so it can)")
            trips = int(np.asarray(value).reshape(-1)[0])
        running = True
        if cond_name:
            value = self.constant(cond_name)
            if value is None:
                raise ConversionError(f"{self.where(node)}: the initial condition '{cond_name}' is computed at run "
                                      f"time; the emulator has no run-time loops, so it must fold to a constant")
            running = bool(np.asarray(value).reshape(-1)[0])
        if trips is None and not cond_name:
            raise ConversionError(f"{self.where(node)}: a Loop without trip count and condition never ends")
        cond_deps = _dependencies(body, body.output[0].name)
        iter_in, cond_in = body.input[0].name, body.input[1].name
        nodes: List[onnx.NodeProto] = []
        scans: List[List[str]] = [[] for _ in range(n_scan)]
        i = 0
        while running and (trips is None or i < trips):
            if i >= MAX_UNROLLED_ITERATIONS:
                raise ConversionError(f"{self.where(node)}: more than {MAX_UNROLLED_ITERATIONS} iterations; too "
                                      f"many to unroll")
            prefix = f"{node.name}/iter{i}/"
            mapping = {iter_in: self.new_constant(f"{prefix}iteration", np.array(i, dtype=np.int64)),
                       cond_in: self.new_constant(f"{prefix}condition", np.array(running))}
            for b_in, outer in zip(body.input[2:], carried):
                mapping[b_in.name] = outer
            nodes += self.clone_body(body, mapping, prefix, evaluate=cond_deps)
            out_names = [mapping.get(o.name, o.name) for o in body.output]
            cond_value = self.constant(out_names[0])
            if cond_value is None:
                if trips is not None and i + 1 >= trips:
                    cond_value = np.array(False)  # the trip count ends the loop whatever the condition says
                else:
                    raise ConversionError(f"{self.where(node)}: the loop condition depends on values computed at run "
                                          f"time (iteration {i}); the emulator has no run-time loops")
            running = bool(np.asarray(cond_value).reshape(-1)[0])
            carried = out_names[1:1 + n_carried]
            for k in range(n_scan):
                scans[k].append(out_names[1 + n_carried + k])
            i += 1
        outputs = list(node.output)
        for final, out in zip(carried, outputs[:n_carried]):
            if out:
                nodes.append(helper.make_node("Identity", [final], [out], name=self.unique(f"{out}/loop")))
        for k, out in enumerate(outputs[n_carried:n_carried + n_scan]):
            if not out:
                continue
            if not scans[k]:
                raise ConversionError(f"{self.where(node)}: the loop runs no iteration, so its scan output '{out}' is "
                                      f"empty with an unknown shape")
            stacked = []
            for item in scans[k]:
                name = self.unique(f"{item}/stacked")
                if self.opset >= 13:
                    axes = self.new_constant(f"{item}/axes", np.array([0], dtype=np.int64))
                    nodes.append(helper.make_node("Unsqueeze", [item, axes], [name], name=name))
                else:
                    nodes.append(helper.make_node("Unsqueeze", [item], [name], name=name, axes=[0]))
                stacked.append(name)
            nodes.append(helper.make_node("Concat", stacked, [out], name=self.unique(f"{out}/scan"), axis=0))
        return nodes

    # ------------------------------------------------------------------ body copies
    def clone_body(self, body: onnx.GraphProto, mapping: Dict[str, str], prefix: str,
                   evaluate: Optional[Set[str]] = None) -> List[onnx.NodeProto]:
        """Copies of body's nodes with every body-local tensor renamed `prefix + name` (mapping is
        updated); body initializers become new top-level constants. Nodes whose outputs are in
        `evaluate` are computed now when their inputs are known constants."""
        for init in body.initializer:
            mapping[init.name] = self.new_constant(prefix + init.name, numpy_helper.to_array(init))
        nodes = []
        for original in body.node:
            node = onnx.NodeProto()
            node.CopyFrom(original)
            for out_i, out in enumerate(node.output):
                if out:
                    mapping[out] = self.unique(prefix + out)
                    node.output[out_i] = mapping[out]
            for in_i, name in enumerate(node.input):
                if name in mapping:
                    node.input[in_i] = mapping[name]
            for g in subgraphs(node):
                _rename_free_references(g, mapping)
            node.name = self.unique(prefix + (original.name or original.op_type))
            nodes.append(node)
            if evaluate and any(o in evaluate for o in original.output):
                self.try_evaluate(node)
        return nodes

    def try_evaluate(self, node: onnx.NodeProto) -> None:
        if subgraphs(node) or not all(not n or n in self.constants for n in node.input):
            return
        if is_constant_node(node):
            self.constants.add(node.output[0], constant_node_value(node, self.opset))
            return
        try:
            values = _evaluate(node, {n: self.constants.value(n) for n in node.input if n}, self.opsets)
        except Exception:  # left to constant folding / the condition check to report
            return
        for name, value in zip([o for o in node.output if o], values):
            self.constants.add(name, np.asarray(value))


def _dependencies(body: onnx.GraphProto, target: str) -> Set[str]:
    """Names of the body tensors `target` is computed from (including itself)."""
    producer = {o: n for n in body.node for o in n.output if o}
    seen: Set[str] = set()
    stack = [target]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        node = producer.get(name)
        if node is not None:
            stack.extend(i for i in node.input if i)
    return seen


def _rename_free_references(graph: onnx.GraphProto, mapping: Dict[str, str]) -> None:
    """Renames, inside a nested subgraph, the names it reads from the body being copied."""
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    for node in graph.node:
        for k, name in enumerate(node.input):
            if name in mapping and name not in defined:
                node.input[k] = mapping[name]
        for g in subgraphs(node):
            _rename_free_references(g, {k: v for k, v in mapping.items() if k not in defined})
        defined.update(node.output)
    for out in graph.output:
        if out.name in mapping and out.name not in defined:
            out.name = mapping[out.name]
