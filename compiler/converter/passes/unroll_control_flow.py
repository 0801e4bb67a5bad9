"""Unrolls Scan, and Loop / If when the decision is known at compile time: what tf2onnx writes
for Keras recurrent layers (a `while` over the time steps becomes a Loop whose trip count and
condition depend only on constants once the input shapes are fixed). What is decided at run
time stays, for the lowering's If/Loop steps (compiler/lowering/control_flow.py, docs/popef.md
§3 "Control flow").

Loop(M, cond, v...) is replaced by one renamed copy of its body per iteration: iteration i sees
iter_num = i, the condition computed by iteration i-1 and the loop-carried values produced by
iteration i-1; its scan outputs are stacked along a new axis 0 (Unsqueeze + Concat). The
condition of each iteration is evaluated while unrolling (only the body nodes it depends on,
which must then have constant inputs), so a loop that stops early unrolls exactly as far as it
runs. If(cond) with a constant cond is replaced by its chosen branch.

Scan always unrolls (its trip count is the scan axis length, static once shapes are): per
iteration, each scan input's slice (Gather at t, or at length-1-t for a reverse direction, along
its scan_input_axes entry) feeds a body copy; scan outputs are stacked along their
scan_output_axes entry (negative: counted from the output's rank, opset 11+), in reverse order
for a reverse direction. Opset 8's Scan (a leading batch axis, `directions`, sequence_lens)
unrolls per batch row; sequence_lens must be absent or the full length.

Kept for run time: an If whose condition is computed at run time (its branches must agree on
each output's static dtype and shape, else a ConversionError naming the node, the output and
both types); a Loop whose trip count or condition is computed at run time, or that runs more
than MAX_UNROLLED_ITERATIONS iterations. Its carried values have static shapes; a scan output
needs a static length, so a kept Loop with scan outputs needs a constant trip count and a
condition that cannot end it early, else a ConversionError explains why (ONNX scan outputs of
a data-dependent length have no static shape). Nested control flow unrolls from the outside in
(the pass repeats until nothing changes; the bodies of kept nodes are unrolled when they are
lowered), then constant folding runs over the unrolled graph.
"""
from typing import Dict, List, Optional, Set

import numpy as np
import onnx
from onnx import helper, numpy_helper

from compiler.converter.pass_registry import register
from compiler.converter.passes.constant_folding import _evaluate, constant_folding
from compiler.errors import ConversionError
from compiler.onnx_graph.constants import Constants, constant_node_value, is_constant_node
from compiler.onnx_graph.graph_edit import node_uses, opset_version, subgraphs
from compiler.onnx_graph.subgraph_model import body_model, rename_free_references
from compiler.onnx_graph.type_inference import body_output_types
from compiler.onnx_graph.type_inference import infer_types

# A Loop without a trip count runs until its condition turns false; beyond this many
# iterations the unrolled graph would be unreasonable for the device anyway.
MAX_UNROLLED_ITERATIONS = 100_000


@register("unroll_control_flow", kind="fold", idempotent=False)
def unroll_control_flow(model, ctx):
    """Unroll Scan, and Loop / inline If decided at compile time; keep run-time ones for If/Loop steps."""
    graph = model.graph
    targets = [n for n in graph.node if n.op_type in ("Loop", "If", "Scan") and n.domain in ("", "ai.onnx")]
    if not targets:
        return model
    opsets = {(imp.domain if imp.domain != "ai.onnx" else ""): int(imp.version) for imp in model.opset_import}
    opsets.setdefault("", opset_version(model))
    unroller = _Unroller(model, opsets, ctx.model_name)
    new_nodes: List[onnx.NodeProto] = []
    for node in graph.node:
        if node in targets:
            expand = {"Loop": unroller.loop, "If": unroller.branch, "Scan": unroller.scan}[node.op_type]
            new_nodes.extend(expand(node))
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
        self.model = model
        self.opset_import = list(model.opset_import)
        self.ir_version = model.ir_version
        self.types = None  # static tensor types, inferred only when needed (model_types)

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
        attrs = {a.name: a.g for a in node.attribute}
        if cond is None:
            self.check_branches_agree(node, attrs)
            return [node]  # decided at run time: lowered to an If step over two sub-programs
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
        if not trip_name and not cond_name:
            raise ConversionError(f"{self.where(node)}: a Loop without trip count and condition never ends")
        trips = None
        if trip_name:
            value = self.constant(trip_name)
            if value is None:
                return self.keep_loop(node, body, f"the trip count '{trip_name}' is computed at run time")
            trips = int(np.asarray(value).reshape(-1)[0])
        running = True
        if cond_name:
            value = self.constant(cond_name)
            if value is None:
                return self.keep_loop(node, body, f"the initial condition '{cond_name}' is computed at run time")
            running = bool(np.asarray(value).reshape(-1)[0])
        n_initializers = len(self.new_initializers)
        cond_deps = _dependencies(body, body.output[0].name)
        iter_in, cond_in = body.input[0].name, body.input[1].name
        nodes: List[onnx.NodeProto] = []
        scans: List[List[str]] = [[] for _ in range(n_scan)]
        i = 0
        while running and (trips is None or i < trips):
            if i >= MAX_UNROLLED_ITERATIONS:
                del self.new_initializers[n_initializers:]
                return self.keep_loop(node, body, f"it runs more than {MAX_UNROLLED_ITERATIONS} iterations, too "
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
                    del self.new_initializers[n_initializers:]
                    return self.keep_loop(node, body, f"the loop condition depends on values computed at run time "
                                                      f"(iteration {i})")
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

    # ------------------------------------------------------------------ kept for run time
    def keep_loop(self, node: onnx.NodeProto, body: onnx.GraphProto, why: str) -> List[onnx.NodeProto]:
        """The Loop stays and is lowered to a Loop step running its body as a sub-program. Its
        carried values have static shapes; a scan output needs a static length: a constant trip
        count and a loop that cannot stop before it."""
        n_carried = len(node.input) - 2
        scan_outputs = [o for o in node.output[n_carried:] if o]
        if not scan_outputs:
            return [node]
        trip_name = node.input[0] if node.input else ""
        if not trip_name or self.constant(trip_name) is None:
            raise ConversionError(
                f"{self.where(node)}: scan output '{scan_outputs[0]}' has a data-dependent length (the trip count "
                f"{'is absent' if not trip_name else repr(trip_name) + ' is computed at run time'}); ONNX scan "
                f"outputs of a data-dependent "
                f"length have no static shape, so the loop can be neither unrolled nor run as a static program "
                f"(make the trip count a constant)")
        if not self.never_stops_early(node, body):
            trips = int(np.asarray(self.constant(trip_name)).reshape(-1)[0])
            raise ConversionError(
                f"{self.where(node)}: scan output '{scan_outputs[0]}' has a data-dependent length ({why}, so the "
                f"loop may stop before its trip count of {trips}); ONNX scan outputs of a data-dependent length "
                f"have no static shape, so a run-time loop may only have scan outputs when its condition stays true")
        return [node]

    def never_stops_early(self, node: onnx.NodeProto, body: onnx.GraphProto) -> bool:
        cond_name = node.input[1] if len(node.input) > 1 else ""
        if cond_name:
            value = self.constant(cond_name)
            if value is None or not bool(np.asarray(value).reshape(-1)[0]):
                return False
        producer = {o: n for n in body.node for o in n.output if o}
        name = body.output[0].name
        while True:
            if name == body.input[1].name:
                return True
            node_ = producer.get(name)
            if node_ is not None and node_.op_type == "Identity":
                name = node_.input[0]
                continue
            if node_ is not None and is_constant_node(node_):
                return bool(np.asarray(constant_node_value(node_, self.opset)).reshape(-1)[0])
            init = next((t for t in body.initializer if t.name == name), None)
            if init is not None:
                return bool(numpy_helper.to_array(init).reshape(-1)[0])
            value = self.constant(name) if node_ is None else None
            return value is not None and bool(np.asarray(value).reshape(-1)[0])

    def check_branches_agree(self, node: onnx.NodeProto, attrs) -> None:
        """A run-time If writes one set of static tensors whichever branch runs."""
        types = self.model_types()
        constants = {n: self.constants.value(n) for n in outer_references_of(node) if n in self.constants}
        found = []
        for key in ("then_branch", "else_branch"):
            sub = body_model(attrs[key], [], types, constants, self.opset_import, self.ir_version)
            try:
                found.append(body_output_types(sub, self.model_name))
            except ConversionError:
                return  # left to shape inference to report
        for out, a, b in zip(node.output, *found):
            if a is None or b is None or not a.is_static or not b.is_static:
                continue
            if a != b:
                raise ConversionError(
                    f"{self.where(node)}: output '{out}' is {a} in then_branch but {b} in else_branch; a run-time If "
                    f"runs as a static program, so both branches must produce the same static shape and dtype")

    def model_types(self):
        if self.types is None:
            self.types = infer_types(self.model, model_name=self.model_name).types
        return self.types

    # ------------------------------------------------------------------ Scan
    def scan(self, node: onnx.NodeProto) -> List[onnx.NodeProto]:
        """Scan always unrolls: its trip count is the scan axis length, static once shapes are."""
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        body = attrs["body"]
        n_scan_in = int(attrs["num_scan_inputs"])
        if self.opset < 9:
            return self.scan8(node, attrs, body, n_scan_in)
        n_state = len(node.input) - n_scan_in
        states, xs = list(node.input[:n_state]), list(node.input[n_state:])
        in_axes = list(attrs.get("scan_input_axes", [0] * n_scan_in))
        in_dirs = list(attrs.get("scan_input_directions", [0] * n_scan_in))
        n_scan_out = len(body.output) - n_state
        out_axes = list(attrs.get("scan_output_axes", [0] * n_scan_out))
        out_dirs = list(attrs.get("scan_output_directions", [0] * n_scan_out))
        inputs = []
        for x, axis, reverse in zip(xs, in_axes, in_dirs):
            shape = self.static_shape(node, x)
            axis = axis + len(shape) if axis < 0 else axis
            inputs.append((x, axis, bool(reverse), shape[axis]))
        out_axes = [a + self.body_output_rank(node, body, n_state + k) + 1 if a < 0 else a
                    for k, a in enumerate(out_axes)]
        nodes, finals, scans = self.scan_sequence(node, body, states, inputs, out_axes, out_dirs, f"{node.name}/")
        nodes += self.bind_outputs(node, list(node.output), finals + scans)
        return nodes

    def scan8(self, node, attrs, body, n_scan_in) -> List[onnx.NodeProto]:
        """Opset 8: a leading batch axis on every input and output, and a sequence_lens input
        that must be absent (every sequence runs its full length); each batch row scans alone."""
        if node.input[0]:
            lens = self.constant(node.input[0])
            full = None
            if lens is not None:
                xs_shape = self.static_shape(node, node.input[len(node.input) - n_scan_in])
                full = bool(np.all(np.asarray(lens) == xs_shape[1]))
            if not full:
                raise ConversionError(f"{self.where(node)}: sequence_lens '{node.input[0]}' must be absent or a "
                                      f"constant equal to the full sequence length; variable-length sequences "
                                      f"have no static shape")
        n_state = len(node.input) - 1 - n_scan_in
        states, xs = list(node.input[1:1 + n_state]), list(node.input[1 + n_state:])
        dirs = list(attrs.get("directions", [0] * n_scan_in))
        batch = self.static_shape(node, xs[0] if xs else states[0])[0]
        n_scan_out = len(body.output) - n_state
        nodes: List[onnx.NodeProto] = []
        per_batch: List[List[str]] = [[] for _ in range(n_state + n_scan_out)]
        for b in range(batch):
            prefix = f"{node.name}/batch{b}/"
            row_states = [self.take(nodes, s, b, 0, prefix) for s in states]
            row_xs = []
            for x, reverse in zip(xs, dirs):
                row = self.take(nodes, x, b, 0, prefix)
                row_xs.append((row, 0, bool(reverse), self.static_shape(node, x)[1]))
            body_nodes, finals, scans = self.scan_sequence(node, body, row_states, row_xs, [0] * n_scan_out,
                                                           [0] * n_scan_out, prefix)
            nodes += body_nodes
            for k, name in enumerate(finals + scans):
                per_batch[k].append(name)
        stacked = [self.stack(nodes, items, 0, f"{node.name}/batch_stack") for items in per_batch]
        nodes += self.bind_outputs(node, list(node.output), stacked)
        return nodes

    def scan_sequence(self, node, body, states, inputs, out_axes, out_dirs, prefix):
        """One unrolled scan: inputs are (tensor, axis, reverse, length). Returns the nodes, the
        final state names and the stacked scan output names."""
        lengths = {length for _, _, _, length in inputs}
        if len(lengths) != 1:
            raise ConversionError(f"{self.where(node)}: the scan inputs have different lengths along their scan "
                                  f"axes ({sorted(lengths)})")
        length = lengths.pop() if inputs else 0
        if length == 0:
            raise ConversionError(f"{self.where(node)}: the scan runs no iteration (scan axis of length 0), so its "
                                  f"scan outputs would be empty with an unknown shape")
        n_state = len(states)
        nodes: List[onnx.NodeProto] = []
        items: List[List[str]] = [[] for _ in out_axes]
        for t in range(length):
            step_prefix = f"{prefix}iter{t}/"
            mapping: Dict[str, str] = {}
            for b_in, outer in zip(body.input[:n_state], states):
                mapping[b_in.name] = outer
            for b_in, (x, axis, reverse, _) in zip(body.input[n_state:], inputs):
                mapping[b_in.name] = self.take(nodes, x, length - 1 - t if reverse else t, axis, step_prefix)
            nodes += self.clone_body(body, mapping, step_prefix)
            out_names = [mapping.get(o.name, o.name) for o in body.output]
            states = out_names[:n_state]
            for k in range(len(out_axes)):
                items[k].append(out_names[n_state + k])
        scans = [self.stack(nodes, list(reversed(seq)) if reverse else seq, axis, f"{prefix}scan{k}")
                 for k, (seq, axis, reverse) in enumerate(zip(items, out_axes, out_dirs))]
        return nodes, states, scans

    def take(self, nodes: List[onnx.NodeProto], tensor: str, index: int, axis: int, prefix: str) -> str:
        """Slice `index` of `tensor` along `axis`, the axis removed (Gather with a scalar index)."""
        indices = self.new_constant(f"{prefix}{tensor}/index", np.array(index, dtype=np.int64))
        name = self.unique(f"{prefix}{tensor}/slice")
        nodes.append(helper.make_node("Gather", [tensor, indices], [name], name=name, axis=axis))
        return name

    def stack(self, nodes: List[onnx.NodeProto], items: List[str], axis: int, base: str) -> str:
        """The items stacked along a new axis `axis` (Unsqueeze each + Concat)."""
        expanded = []
        for item in items:
            name = self.unique(f"{item}/stacked")
            if self.opset >= 13:
                axes = self.new_constant(f"{item}/axes", np.array([axis], dtype=np.int64))
                nodes.append(helper.make_node("Unsqueeze", [item, axes], [name], name=name))
            else:
                nodes.append(helper.make_node("Unsqueeze", [item], [name], name=name, axes=[axis]))
            expanded.append(name)
        out = self.unique(base)
        nodes.append(helper.make_node("Concat", expanded, [out], name=out, axis=axis))
        return out

    def bind_outputs(self, node, outputs: List[str], values: List[str]) -> List[onnx.NodeProto]:
        return [helper.make_node("Identity", [value], [out], name=self.unique(f"{out}/{node.op_type.lower()}"))
                for value, out in zip(values, outputs) if out]

    def static_shape(self, node, tensor: str):
        t = self.model_types().get(tensor)
        if t is None or not t.is_static:
            raise ConversionError(f"{self.where(node)}: input '{tensor}' has "
                                  f"{'no inferred shape' if t is None else 'the non-static shape ' + t.shape_text()}; "
                                  f"Scan unrolls at compile time and needs static shapes (set --input_shape)")
        return tuple(t.shape)

    def body_output_rank(self, node, body: onnx.GraphProto, index: int) -> int:
        out = body.output[index]
        if out.type.tensor_type.HasField("shape"):
            return len(out.type.tensor_type.shape.dim)
        raise ConversionError(f"{self.where(node)}: scan output '{out.name}' of the body has no declared rank, "
                              f"needed to resolve a negative scan_output_axes entry")

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
                rename_free_references(g, mapping)
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


def outer_references_of(node: onnx.NodeProto) -> List[str]:
    return [n for n in node_uses(node) if n]
