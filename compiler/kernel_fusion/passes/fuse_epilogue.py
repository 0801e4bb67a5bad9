"""Conv / Gemm / MatMul + bias + residual sum + activation -> one internal fused op.

Walks forward from each Conv, Gemm and MatMul (constant 2-D weights for MatMul) over
single-reader tensors and absorbs, in this order, each of them if present:

  alpha (MatMul only) a Mul by a one-element constant right after it, FusedMatMul's `alpha`
        (fold_column_scale_into_matmul leaves one to undo the power of two that brought its
        float16 weights into range; the kernel applies it in float32);
  bias  Add of a constant that is per output channel (Conv: [M,1,1]-like; MatMul: [N]-like)
        or broadcastable to Gemm's [M, N] (folded into C);
  sum   Add of a run-time tensor of exactly the output's shape (ResNet's shortcut);
  act   Relu, Clip (constant bounds), LeakyRelu, Sigmoid, Tanh, HardSigmoid, HardSwish, Gelu
        (opset 20), or a chain of scalar-constant elementwise ops that computes one of Swish
        (x·σ(x)), GeluErf or GeluTanh (the forms tf2onnx emits), recognized by evaluating
        the chain on sample points (any operand order or association matches).

The result is FusedConv / FusedGemm / FusedMatMul (compiler/onnx_graph/internal_ops.py),
written where the last absorbed node was and producing its output, so graph outputs keep
their names; an intermediate tensor that is a graph output or has other readers stops the
walk there. Runs after float_to_half: the fused kernel computes bias, sum and activation in
float32 and rounds to float16 once."""
import math
from typing import List, Optional, Tuple

import numpy as np
import onnx
from onnx import helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph.activations import ACTIVATIONS, ELEMENTWISE_OPS
from compiler.onnx_graph.graph_edit import consumers, remove_nodes, remove_value_info, set_float_attribute
from compiler.onnx_graph.graph_rewrite import GraphRewrite
from compiler.onnx_graph.internal_ops import ensure_domain_imported, fused_node
from compiler.onnx_graph.type_inference import infer_types

_DEFAULT_DOMAINS = ("", "ai.onnx")
_FUSED = {"Conv": "FusedConv", "Gemm": "FusedGemm", "MatMul": "FusedMatMul"}
# Elementwise ops a recognized activation chain may contain (their other operands are scalar constants).
_CHAIN_OPS = {op: e.numpy for op, e in ELEMENTWISE_OPS.items() if e.numpy is not None}
# Activations a chain may compute: (name, activation_params, numpy form).
_CHAIN_TARGETS = [(name, list(a.chain_params), a.chain) for name, a in ACTIVATIONS.items() if a.chain is not None]
# ONNX op -> the activation it is, taken over with its attributes as activation_params.
_DIRECT = {a.onnx_op: name for name, a in ACTIVATIONS.items() if a.onnx_op}
_MAX_CHAIN = 10
_SAMPLES = np.linspace(-7.0, 7.0, 141)


@register("fuse_epilogue", kind="fuse")
def fuse_epilogue(model, ctx):
    """Fuse Conv/Gemm/MatMul with a following bias Add, residual Add and activation (FusedConv...)."""
    graph = model.graph
    if not any(n.op_type in _FUSED and n.domain in _DEFAULT_DOMAINS for n in graph.node):
        return model
    if _Fuser(model, ctx).run():
        ensure_domain_imported(model)
    return model


class _Fuser(GraphRewrite):
    def __init__(self, model: onnx.ModelProto, ctx):
        super().__init__(model, ctx.model_name)
        self.ctx = ctx
        self.types = infer_types(model, model_name=ctx.model_name).types

    def run(self) -> bool:
        changed = False
        for base in [n for n in self.graph.node if n.op_type in _FUSED and n.domain in _DEFAULT_DOMAINS]:
            changed |= self._fuse_from(base)
        return changed

    # --- one chain ----------------------------------------------------------------------------
    def _fuse_from(self, base: onnx.NodeProto) -> bool:
        if base.op_type == "MatMul" and not self._matmul_has_constant_weights(base):
            return False
        out_type = self.types.get(base.output[0])
        if out_type is None or not out_type.is_static:
            return False
        readers = consumers(self.graph)
        inputs = list(base.input) + [""] * (3 - len(base.input)) if base.op_type != "MatMul" else list(base.input) + [""]
        attrs_from = base
        absorbed: List[onnx.NodeProto] = []
        cur = base.output[0]

        def single_reader(name: str) -> Optional[onnx.NodeProto]:
            r = readers.get(name, [])
            return r[0] if len(r) == 1 and name not in self.outputs and r[0].domain in _DEFAULT_DOMAINS else None

        nxt = single_reader(cur)
        if base.op_type == "MatMul" and nxt is not None and nxt.op_type == "Mul":
            other = _other_operand(nxt, cur)
            if other is not None and other in self.constants:
                value = self.constants.value(other)
                if value.size == 1 and value.ndim <= len(out_type.shape) and value.dtype.kind == "f":
                    attrs_from = onnx.NodeProto()
                    attrs_from.CopyFrom(base)
                    attrs_from.attribute.append(helper.make_attribute("alpha", float(value.reshape(-1)[0])))
                    absorbed.append(nxt)
                    cur = nxt.output[0]
                    nxt = single_reader(cur)
        # bias and residual sum, in either order (addition commutes): Adds of a constant merge
        # into the bias, one Add of a run-time tensor of the output's shape becomes the sum.
        total = inputs + [""]
        while nxt is not None and nxt.op_type == "Add":
            other = _other_operand(nxt, cur)
            if other is None:
                break
            if other in self.constants:
                # attrs_from: the base node, or for Gemm a copy with beta folded into C.
                merged = self._merge_bias(attrs_from, total[:3], self.constants.value(other), out_type.shape)
                if merged is None:
                    break
                total[:3], attrs_from = merged
            else:
                t = self.types.get(other)
                if (total[3] or t is None or not t.is_static or t.shape != out_type.shape
                        or t.elem_type != out_type.elem_type):
                    break
                total[3] = other
            absorbed.append(nxt)
            cur = nxt.output[0]
            nxt = single_reader(cur)
        # activation
        activation, params, act_nodes = "", [], []
        found = self._activation(cur, nxt) if nxt is not None else None
        if found is None and cur not in self.outputs:  # Swish/Gelu chains read cur more than once
            found = self._recognized_chain(cur, readers)
        if found is not None:
            activation, params, act_nodes = found
            absorbed.extend(act_nodes)
            cur = act_nodes[-1].output[0]
        if not absorbed:
            return False
        fused = fused_node(_FUSED[base.op_type], total, cur, base.name or cur, attrs_from, activation, params)
        position = max(list(self.graph.node).index(n) for n in absorbed)
        self.graph.node.insert(position + 1, fused)
        dropped = [base.output[0]] + [n.output[0] for n in absorbed[:-1]] + [o for n in act_nodes for o in n.output]
        remove_value_info(self.graph, [d for d in dropped if d != cur])
        remove_nodes(self.graph, [base] + absorbed)
        self.ctx.logger.debug("fuse_epilogue: %s '%s' + %s -> %s", base.op_type, base.name,
                              [n.op_type for n in absorbed], fused.op_type)
        return True

    def _matmul_has_constant_weights(self, node) -> bool:
        if node.input[1] not in self.constants:
            return False
        return self.constants.value(node.input[1]).ndim == 2

    # --- bias ---------------------------------------------------------------------------------
    def _merge_bias(self, base, inputs, value: np.ndarray, out_shape) -> Optional[Tuple[list, onnx.NodeProto]]:
        """(new inputs, node whose attributes the fused node takes) or None when `value` is not
        a bias the fused op can take."""
        rank = len(out_shape)
        if value.ndim > rank or value.dtype != _np_type(self.types[base.output[0]].elem_type):
            return None
        padded = value.reshape((1,) * (rank - value.ndim) + value.shape)
        if base.op_type == "Conv":
            channels = out_shape[1]
            if any(d != 1 for i, d in enumerate(padded.shape) if i != 1) or padded.shape[1] not in (1, channels):
                return None
            bias = np.broadcast_to(padded.reshape(-1).astype(np.float32), (channels,))
            if inputs[2]:
                if inputs[2] not in self.constants:
                    return None
                bias = bias + self.constants.value(inputs[2]).astype(np.float32)
            return inputs[:2] + [self.add_initializer(f"{base.name or base.output[0]}_bias", bias.astype(value.dtype))], base
        if base.op_type == "MatMul":
            n = out_shape[-1]
            if any(d != 1 for d in padded.shape[:-1]) or padded.shape[-1] not in (1, n):
                return None
            bias = np.broadcast_to(padded.reshape(-1).astype(np.float32), (n,))
            if inputs[2]:
                bias = bias + self.constants.value(inputs[2]).astype(np.float32)
            return inputs[:2] + [self.add_initializer(f"{base.name or base.output[0]}_bias", bias.astype(value.dtype))], base
        # Gemm: Y = alpha·op(A)op(B) + beta·C, so C' = beta·C + value, beta' = 1.
        if value.ndim > 2:
            return None
        attrs = {a.name: helper.get_attribute_value(a) for a in base.attribute}
        beta = float(attrs.get("beta", 1.0))
        c = np.asarray(value, np.float32)
        if inputs[2]:
            if inputs[2] not in self.constants:
                return None
            c = beta * self.constants.value(inputs[2]).astype(np.float32) + c
        try:
            np.broadcast_shapes(c.shape, tuple(out_shape))
        except ValueError:
            return None
        if np.broadcast_shapes(c.shape, tuple(out_shape)) != tuple(out_shape):
            return None
        like = onnx.NodeProto()
        like.CopyFrom(base)
        set_float_attribute(like, "beta", 1.0)
        return inputs[:2] + [self.add_initializer(f"{base.name or base.output[0]}_c", c.astype(value.dtype))], like

    # --- activation ---------------------------------------------------------------------------
    def _activation(self, cur: str, node) -> Optional[Tuple[str, list, list]]:
        """A single activation node reading cur (its only reader)."""
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        op = node.op_type
        if node.input[0] != cur:
            return None
        if op in _DIRECT:
            activation = ACTIVATIONS[_DIRECT[op]]
            return _DIRECT[op], [float(attrs.get(p, activation.onnx_defaults[p])) for p in activation.params], [node]
        if op == "Gelu":
            approximate = attrs.get("approximate", b"none")
            approximate = approximate.decode() if isinstance(approximate, bytes) else approximate
            return ("GeluTanh" if approximate == "tanh" else "GeluErf"), [], [node]
        if op == "Clip":
            bounds = self._clip_bounds(node, attrs)
            if bounds is None:
                return None
            return ("Relu", [], [node]) if bounds == (0.0, math.inf) else ("Clip", list(bounds), [node])
        return None

    def _clip_bounds(self, node, attrs) -> Optional[Tuple[float, float]]:
        if self.opset < 11:
            return float(attrs.get("min", -math.inf)), float(attrs.get("max", math.inf))
        bounds = []
        for i, default in ((1, -math.inf), (2, math.inf)):
            if len(node.input) > i and node.input[i]:
                if node.input[i] not in self.constants:
                    return None
                bounds.append(float(np.asarray(self.constants.value(node.input[i])).reshape(-1)[0]))
            else:
                bounds.append(default)
        return tuple(bounds)

    def _recognized_chain(self, x: str, readers) -> Optional[Tuple[str, list, list]]:
        """The smallest chain of scalar-constant elementwise ops starting at x whose single
        result computes Swish / GeluErf / GeluTanh, with every intermediate read only inside it."""
        chain: List[onnx.NodeProto] = []
        available = {x}
        for _ in range(_MAX_CHAIN):
            step = None
            for name in list(available):
                for reader in readers.get(name, []):
                    if reader in chain or reader.op_type not in _CHAIN_OPS or reader.domain not in _DEFAULT_DOMAINS:
                        continue
                    if all(i in available or self._scalar_constant(i) for i in reader.input) and \
                            any(i in available for i in reader.input):
                        step = reader
                        break
                if step is not None:
                    break
            if step is None:
                return None
            chain.append(step)
            available.add(step.output[0])
            result = step.output[0]
            if not self._closed(x, chain, result, readers):
                continue
            values = self._evaluate(x, chain)
            if values is None:
                continue
            for name, params, fn in _CHAIN_TARGETS:
                ref = fn(_SAMPLES)
                tol = 2e-3 if self.types[x].elem_type == onnx.TensorProto.FLOAT16 else 1e-5
                if np.all(np.abs(values - ref) <= tol * np.maximum(1.0, np.abs(ref))):
                    return name, params, list(chain)
        return None

    def _closed(self, x, chain, result, readers) -> bool:
        """Only chain nodes read x and the chain's intermediates, and `result` leaves it."""
        members = {id(n) for n in chain}
        for name in [x] + [n.output[0] for n in chain if n.output[0] != result]:
            if name in self.outputs or any(id(r) not in members for r in readers.get(name, [])):
                return False
        return True

    def _scalar_constant(self, name: str) -> bool:
        return name in self.constants and self.constants.value(name).size == 1

    def _evaluate(self, x, chain) -> Optional[np.ndarray]:
        values = {x: _SAMPLES}
        for node in chain:
            args = [values[i] if i in values else np.float64(self.constants.value(i).reshape(-1)[0])
                    for i in node.input]
            with np.errstate(all="ignore"):
                values[node.output[0]] = _CHAIN_OPS[node.op_type](*args)
        out = values[chain[-1].output[0]]
        return out if np.shape(out) == _SAMPLES.shape else None

    # --- edits --------------------------------------------------------------------------------


def _other_operand(add, cur: str) -> Optional[str]:
    if len(add.input) != 2 or cur not in add.input or add.input[0] == add.input[1]:
        return None
    return add.input[1] if add.input[0] == cur else add.input[0]


def _np_type(elem_type: int):
    return helper.tensor_dtype_to_np_dtype(elem_type)
