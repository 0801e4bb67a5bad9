"""Chains of elementwise ops -> one ai.tfpopef::FusedElementwise running them in one loop.

Each elementwise op is a full pass over memory; a chain of them (x·σ(x)·s + b, clip(x/6+0.5),
a normalization tail ...) reads and writes every element once per op. This pass groups
connected elementwise nodes whose intermediate tensors are read only inside the group, and
writes one FusedElementwise node whose `program` runs them per cache-sized block
(tf_popef_op/runtime/cc/kernels/fused_elementwise.cc).

Fusable nodes (default domain, float32/float16 output of static shape S):
  unary   Neg Abs Relu Sqrt Reciprocal Exp Log Tanh Sigmoid Erf
  binary  Add Sub Mul Div, Pow with a scalar-constant exponent
  Clip    with constant (or absent) bounds
whose operands are each a run-time tensor of shape S, a constant of shape S, a constant of
S[-1] elements broadcasting along the last axis only ([N] or [1, ..., N]), or a scalar
constant (written into the program as a literal). Anything else (another broadcast, an
integer dtype, a dynamic shape) leaves the node unfused; so does a group that would have more
than one output. (With one output, the group's last node in graph order, no outside node can
sit on a path between two members: the graph is topologically sorted.)

The program's text form (parsed by the runtime's elementwise_program.h): instructions joined
by ';', each `opcode operand...` with operands xI (input I), tJ (result of instruction J) or
a float literal; the last instruction is the output. Input 0 is a run-time tensor of shape S.
Runs after fuse_epilogue (which takes the chains that follow a Conv/Gemm/MatMul) and
fuse_layernorm; a group of a single node is left as the plain op."""
from typing import Dict, List, Optional

import numpy as np
import onnx
from onnx import helper, numpy_helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph.activations import ELEMENTWISE_OPS
from compiler.onnx_graph.graph_edit import consumers, remove_nodes, remove_value_info
from compiler.onnx_graph.graph_rewrite import GraphRewrite
from compiler.onnx_graph.internal_ops import DOMAIN, ensure_domain_imported
from compiler.onnx_graph.type_inference import infer_types

_DEFAULT_DOMAINS = ("", "ai.onnx")
_UNARY = {op: e.program_op for op, e in ELEMENTWISE_OPS.items() if e.arity == 1 and e.program_op}
# (The program also has max/min; ONNX Max/Min have no emulator kernel of their own, so a model
# holding them does not compile unfused, and the pass does not write them.)
_BINARY = {op: e.program_op for op, e in ELEMENTWISE_OPS.items() if e.arity == 2 and e.program_op}
_FLOATS = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16)
_MAX_INPUTS = 64  # the kernel's limit


@register("fuse_elementwise_chain", kind="fuse")
def fuse_elementwise_chain(model, ctx):
    """Fuse connected elementwise ops (full / per-last-axis / scalar operands) into one FusedElementwise."""
    graph = model.graph
    if not any(n.op_type in _UNARY or n.op_type in _BINARY or n.op_type == "Clip" for n in graph.node):
        return model
    if _ChainFuser(model, ctx).run():
        ensure_domain_imported(model)
    return model


class _ChainFuser(GraphRewrite):
    def __init__(self, model: onnx.ModelProto, ctx):
        super().__init__(model, ctx.model_name)
        self.ctx = ctx
        self.types = infer_types(model, model_name=ctx.model_name).types

    def run(self) -> bool:
        nodes = list(self.graph.node)
        fusable = {id(n): n for n in nodes if self._fusable(n)}
        if len(fusable) < 2:
            return False
        readers = consumers(self.graph)
        parent = {k: k for k in fusable}

        def find(k):
            while parent[k] != k:
                parent[k] = parent[parent[k]]
                k = parent[k]
            return k

        # Join a producer with its readers when every reader of the tensor is fusable and of the
        # same shape (then the tensor never needs to exist outside the group).
        for node in fusable.values():
            out = node.output[0]
            r = readers.get(out, [])
            if out in self.outputs or not r or any(id(x) not in fusable for x in r):
                continue
            if any(self.types[x.output[0]].shape != self.types[out].shape for x in r):
                continue
            for x in r:
                parent[find(id(x))] = find(id(node))
        groups: Dict[int, List[onnx.NodeProto]] = {}
        for n in nodes:  # graph order = a topological order within each group
            if id(n) in fusable:
                groups.setdefault(find(id(n)), []).append(n)
        changed = False
        for members in groups.values():
            if len(members) >= 2:
                changed |= self._fuse(members, readers)
        return changed

    # --- which nodes ------------------------------------------------------------------------------
    def _fusable(self, node) -> bool:
        if node.domain not in _DEFAULT_DOMAINS or len(node.output) != 1:
            return False
        op = node.op_type
        out = self.types.get(node.output[0])
        if out is None or not out.is_static or out.elem_type not in _FLOATS:
            return False
        if op in _UNARY:
            ok = len(node.input) == 1
        elif op in _BINARY:
            ok = len(node.input) == 2 and (op != "Pow" or self._scalar(node.input[1]) is not None)
        elif op == "Clip":
            ok = self._clip_bounds(node) is not None
        else:
            return False
        data = node.input[:1] if op in ("Clip", "Pow") else node.input
        return ok and all(self._operand_kind(name, out) is not None for name in data)

    def _operand_kind(self, name: str, out) -> Optional[str]:
        """'full', 'row' (per last axis), 'scalar' (a constant literal) or None."""
        t = self.types.get(name)
        if name in self.constants:
            value = self.constants.value(name)
            if value.dtype.kind != "f":
                return None
            if value.size == 1 and value.ndim <= len(out.shape):
                return "scalar"
            if tuple(value.shape) == tuple(out.shape):
                return "full"
            if (out.shape and value.ndim <= len(out.shape) and value.shape[-1] == out.shape[-1]
                    and all(d == 1 for d in value.shape[:-1])):
                return "row"
            return None
        if t is None or not t.is_static or t.elem_type != out.elem_type or tuple(t.shape) != tuple(out.shape):
            return None
        return "full"

    def _scalar(self, name: str) -> Optional[float]:
        if name not in self.constants:
            return None
        v = self.constants.value(name)
        return float(v.reshape(-1)[0]) if v.size == 1 and v.dtype.kind == "f" else None

    def _clip_bounds(self, node):
        if self.opset < 11:
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            return float(attrs.get("min", -np.inf)), float(attrs.get("max", np.inf))
        bounds = []
        for i, default in ((1, -np.inf), (2, np.inf)):
            if len(node.input) > i and node.input[i]:
                v = self._scalar(node.input[i])
                if v is None:
                    return None
                bounds.append(v)
            else:
                bounds.append(default)
        return tuple(bounds)

    # --- one group ----------------------------------------------------------------------------------
    def _fuse(self, members: List[onnx.NodeProto], readers) -> bool:
        ids = {id(n) for n in members}
        produced = {n.output[0] for n in members}
        exits = [n.output[0] for n in members
                 if n.output[0] in self.outputs or any(id(r) not in ids for r in readers.get(n.output[0], []))]
        if len(exits) != 1 or exits[0] != members[-1].output[0]:
            self.ctx.logger.debug("fuse_elementwise_chain: group ending at '%s' has outputs %s; left unfused",
                                  members[-1].name, exits)
            return False
        out = self.types[exits[0]]
        inputs: List[str] = []
        slot: Dict[str, str] = {}

        def operand(name: str) -> str:
            if name in produced:
                return f"t{order[name]}"
            kind = self._operand_kind(name, out)
            if kind == "scalar":
                return _literal(self._scalar(name))
            if name not in slot:
                slot[name] = f"x{len(inputs)}"
                inputs.append(name)
            return slot[name]

        # Run-time full-shape inputs first: input 0 then gives the output's type.
        for n in members:
            for name in n.input[:1] if n.op_type in ("Clip", "Pow") else n.input:
                if name not in produced and name not in self.constants and name not in slot:
                    slot[name] = f"x{len(inputs)}"
                    inputs.append(name)
        if not inputs:
            return False  # constants only: constant folding's job
        order: Dict[str, int] = {}
        program: List[str] = []
        for n in members:
            op = n.op_type
            if op in _UNARY:
                text = f"{_UNARY[op]} {operand(n.input[0])}"
            elif op == "Pow":
                text = f"pow {operand(n.input[0])} {_literal(self._scalar(n.input[1]))}"
            elif op in _BINARY:
                text = f"{_BINARY[op]} {operand(n.input[0])} {operand(n.input[1])}"
            else:
                lo, hi = self._clip_bounds(n)
                text = f"clip {operand(n.input[0])} {_literal(lo)} {_literal(hi)}"
            order[n.output[0]] = len(program)
            program.append(text)
        if len(inputs) > _MAX_INPUTS:
            return False
        inputs = [self._row_vector(name, out) for name in inputs]
        last = members[-1]
        fused = helper.make_node("FusedElementwise", inputs, [exits[0]], name=last.name or exits[0], domain=DOMAIN,
                                 program="; ".join(program))
        position = max(list(self.graph.node).index(n) for n in members)
        self.graph.node.insert(position + 1, fused)
        remove_value_info(self.graph, [n.output[0] for n in members[:-1]])
        remove_nodes(self.graph, members)
        self.ctx.logger.debug("fuse_elementwise_chain: %s -> FusedElementwise '%s': %s",
                              [n.op_type for n in members], fused.name, fused.attribute[0].s.decode())
        return True

    def _row_vector(self, name: str, out) -> str:
        """Per-last-axis constants stay as they are (the kernel reads [N] or [1, ..., N]); a
        constant of another float dtype than the output is converted (the kernel reads one dtype)."""
        if name not in self.constants:
            return name
        value = self.constants.value(name)
        want = helper.tensor_dtype_to_np_dtype(out.elem_type)
        if value.dtype == want:
            return name
        new = f"{name}_as_{np.dtype(want).name}"
        if new not in self.constants:
            self.graph.initializer.append(numpy_helper.from_array(value.astype(want), new))
            self.constants.add(new, value.astype(want))
        return new


def _literal(v: float) -> str:
    """A float32 value as text that parses back to the same float32 (C strtof)."""
    v = float(np.float32(v))
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return repr(v)
