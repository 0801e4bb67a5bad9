"""A decomposed layer normalization over the last axis or the channels -> one LayerNormalization node.

tf2onnx exports Keras' LayerNormalization (and TF's moments-based ones) as about a dozen
elementwise and reduction nodes, e.g. for Keras 3:

    mean = GlobalAveragePool(x)            (or ReduceMean over the last axis, keepdims)
    d    = Sub(x, mean);  var = GlobalAveragePool(Mul(d, d))     (or Pow(d, 2), ReduceMean)
    r    = Reciprocal(Sqrt(Add(var, eps)))                       (or Div(1, ·), Pow(·, -0.5))
    m    = Mul(r, gamma)
    y    = Add(Mul(x, m), Add(Mul(Neg(mean), m), beta))

which the runtime ran as 13 kernel steps, six of them over the whole activation. The pass finds the anchor
(mean = mean of x over the last axis; var = mean over the last axis of a square of x − mean)
structurally, then grows the region that follows from those tensors, x and per-feature
constants (shape [..., 1, inner] or scalars) one elementwise node at a time in graph order.
Whenever the region's newest node is its only exit, the region is evaluated on random rows
of varied mean and spread; the largest region that computes
((x − mean) / sqrt(var + eps)) · gamma + beta for some per-feature gamma and beta (fitted by
least squares per feature, then checked on every row at 1e-4 relative) becomes
LayerNormalization(x, gamma, beta, axis=-1, epsilon=eps) writing the exit tensor.
Any operand order or algebraic arrangement of the tail matches; a region whose values are
something else is left as it is. eps is the scalar constant added to var.

A normalization over axis 1 of an [N, C, ...] tensor (ConvNeXt's LayerNorm over the channels,
which tf2onnx moves into NCHW next to the depthwise convolution) is the same region with the
statistics over the channels: it becomes Transpose(channels last) -> LayerNormalization ->
Transpose(back). A channels-last Transpose right after it (ConvNeXt's, into the pointwise
MatMuls) cancels the Transpose back, so the block keeps as many transposes as before and
loses the reductions and the half-dozen full-size elementwise passes.

LayerNormalization is an opset-17 op: models that import an older opset are left unfused."""
from typing import Dict, List, Optional, Set

import numpy as np
import onnx
from onnx import helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph.graph_edit import consumers, opset_version, producers, remove_nodes, remove_value_info
from compiler.onnx_graph.graph_rewrite import GraphRewrite
from compiler.onnx_graph.type_inference import infer_types

_DEFAULT_DOMAINS = ("", "ai.onnx")
_MIN_OPSET = 17
_TAIL_OPS = ("Add", "Sub", "Mul", "Div", "Sqrt", "Reciprocal", "Neg", "Pow")
_MAX_REGION = 24
_ROWS = 10


@register("fuse_layernorm", kind="fuse")
def fuse_layernorm(model, ctx):
    """Fuse a decomposed last-axis or channel layer normalization (mean/variance/rsqrt/scale/shift) into LayerNormalization."""
    graph = model.graph
    if opset_version(model) < _MIN_OPSET:
        return model
    if not any(n.op_type in ("GlobalAveragePool", "ReduceMean") for n in graph.node):
        return model
    fuser = _LayerNormFuser(model, ctx)
    for node in [n for n in graph.node if n.op_type in ("GlobalAveragePool", "ReduceMean")]:
        fuser.try_anchor(node)
    return model


class _LayerNormFuser(GraphRewrite):
    def __init__(self, model: onnx.ModelProto, ctx):
        super().__init__(model, ctx.model_name)
        self.ctx = ctx
        self.types = infer_types(model, model_name=ctx.model_name).types
        self.rng = np.random.default_rng(0)

    # --- anchor: mean and variance over the normalized axis --------------------------------------
    def try_anchor(self, mean_node: onnx.NodeProto) -> bool:
        if mean_node.output[0] not in producers(self.graph):
            return False  # already fused away by an earlier anchor
        x = mean_node.input[0]
        xt = self.types.get(x)
        if xt is None or not xt.is_static or len(xt.shape) < 2 or xt.elem_type not in _FLOAT_TYPES:
            return False
        rank = len(xt.shape)
        axis = self._mean_axis(mean_node, rank)
        if axis not in (rank - 1, 1):
            return False
        readers = consumers(self.graph)
        mean = mean_node.output[0]
        var_node = self._variance(x, mean, readers, rank, axis)
        if var_node is None:
            return False
        region = self._grow([mean_node] + var_node[1], x, readers, axis)
        if region is None:
            return False
        nodes, gamma, beta, eps = region
        return self._replace(x, nodes, gamma, beta, eps, xt, axis)

    def _mean_axis(self, node, rank: int) -> Optional[int]:
        """The one axis (non-negative) a keepdims mean averages, else None."""
        if node.domain not in _DEFAULT_DOMAINS:
            return None
        if node.op_type == "GlobalAveragePool":
            return 2 if rank == 3 else None  # averages dims 2.. of [N, C, L]: the last axis only
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if not attrs.get("keepdims", 1) or attrs.get("noop_with_empty_axes", 0):
            return None
        if len(node.input) > 1 and node.input[1]:  # opset 18: axes as an input
            if node.input[1] not in self.constants:
                return None
            axes = [int(a) for a in self.constants.value(node.input[1]).reshape(-1)]
        else:
            axes = [int(a) for a in attrs.get("axes", [])]
        return axes[0] % rank if len(axes) == 1 else None

    def _variance(self, x: str, mean: str, readers, rank: int, axis: int):
        """(var node, [sub, square, var]) with var = mean over `axis` of (x − mean)²."""
        for sub in readers.get(mean, []):
            if sub.op_type != "Sub" or list(sub.input) != [x, mean]:
                continue
            d = sub.output[0]
            for sq in readers.get(d, []):
                square = (sq.op_type == "Mul" and list(sq.input) == [d, d]) or (
                    sq.op_type == "Pow" and sq.input[0] == d and self._scalar(sq.input[1]) == 2.0)
                if not square:
                    continue
                for var in readers.get(sq.output[0], []):
                    if var.op_type in ("GlobalAveragePool", "ReduceMean") and self._mean_axis(var, rank) == axis:
                        return var, [sub, sq, var]
        return None

    # --- region growth and numerical check --------------------------------------------------------
    def _grow(self, anchor: List[onnx.NodeProto], x: str, readers, axis: int):
        region = list(anchor)
        produced = {n.output[0] for n in region}
        eps = self._epsilon(anchor[-1].output[0], readers)
        if eps is None:
            return None
        order = {id(n): i for i, n in enumerate(self.graph.node)}
        best = None  # the largest matching region: a trailing Mul(gamma) / Add(beta) goes in too
        for _ in range(_MAX_REGION):
            step = self._next_node(region, produced, x, readers, order, axis)
            if step is None:
                break
            region.append(step)
            produced.add(step.output[0])
            exit_name = step.output[0]
            if not self._closed(x, region, exit_name, readers):
                continue
            affine = self._fit(x, region, exit_name, eps, axis)
            if affine is not None:
                best = list(region), affine[0], affine[1], eps
        return best

    def _next_node(self, region, produced: Set[str], x: str, readers, order, axis: int) -> Optional[onnx.NodeProto]:
        """The earliest (in graph order) elementwise node that reads the region and only the
        region, x and per-feature constants."""
        members = {id(n) for n in region}
        candidates = []
        for name in produced:
            for r in readers.get(name, []):
                if id(r) in members or r.op_type not in _TAIL_OPS or r.domain not in _DEFAULT_DOMAINS:
                    continue
                if all(i in produced or i == x or self._per_feature_constant(i, x, axis) for i in r.input):
                    candidates.append(r)
        return min(candidates, key=lambda n: order.get(id(n), 1 << 30)) if candidates else None

    def _closed(self, x: str, region, exit_name: str, readers) -> bool:
        members = {id(n) for n in region}
        for n in region:
            name = n.output[0]
            if name == exit_name:
                continue
            if name in self.outputs or any(id(r) not in members for r in readers.get(name, [])):
                return False
        return True

    def _fit(self, x: str, region, exit_name: str, eps: float, axis: int):
        """(gamma, beta) when the region computes layer normalization of x over `axis` with eps,
        else None."""
        inner = self.types[x].shape[axis]
        rank = len(self.types[x].shape)
        scales = np.exp(self.rng.uniform(-2.0, 2.0, (_ROWS, 1)))
        rows = self.rng.standard_normal((_ROWS, inner)) * scales + self.rng.uniform(-3.0, 3.0, (_ROWS, 1))
        shape = [1] * rank  # the rows along the axis before `axis`, every other axis of size 1
        shape[axis - 1], shape[axis] = _ROWS, inner
        sample = rows.reshape(shape)
        out = self._evaluate(x, sample, region, exit_name, axis)
        if out is None:
            return None
        out = out.reshape(_ROWS, inner)
        mean = rows.mean(axis=1, keepdims=True)
        normalized = (rows - mean) / np.sqrt(((rows - mean) ** 2).mean(axis=1, keepdims=True) + eps)
        # Least squares per feature over the rows: out = gamma·normalized + beta.
        n_c = normalized - normalized.mean(axis=0)
        gamma = (n_c * (out - out.mean(axis=0))).sum(axis=0) / (n_c * n_c).sum(axis=0)
        beta = out.mean(axis=0) - gamma * normalized.mean(axis=0)
        expected = normalized * gamma + beta
        tol = 1e-4 * np.maximum(1.0, np.abs(expected))
        if not np.all(np.isfinite(out)) or not np.all(np.abs(out - expected) <= tol):
            return None
        return gamma, beta

    def _evaluate(self, x: str, sample: np.ndarray, region, exit_name: str, axis: int) -> Optional[np.ndarray]:
        values: Dict[str, np.ndarray] = {x: sample}
        with np.errstate(all="ignore"):
            for node in region:
                args = [values[i] if i in values else self.constants.value(i).astype(np.float64) for i in node.input]
                op = node.op_type
                if op in ("GlobalAveragePool", "ReduceMean"):
                    values[node.output[0]] = args[0].mean(axis=axis, keepdims=True)
                else:
                    values[node.output[0]] = _ELEMENTWISE[op](*args)
        out = values[exit_name]
        return out if out.shape == sample.shape else None

    # --- helpers --------------------------------------------------------------------------------
    def _epsilon(self, var: str, readers) -> Optional[float]:
        for r in readers.get(var, []):
            if r.op_type == "Add" and var in r.input:
                other = r.input[1] if r.input[0] == var else r.input[0]
                value = self._scalar(other)
                if value is not None and 0.0 <= value < 1.0:
                    return value
        return None

    def _scalar(self, name: str) -> Optional[float]:
        if name not in self.constants:
            return None
        v = self.constants.value(name)
        return float(v.reshape(-1)[0]) if v.size == 1 else None

    def _per_feature_constant(self, name: str, x: str, axis: int) -> bool:
        """A constant that varies along x's `axis` only (e.g. [..., 1, inner] for the last axis,
        [1, C, 1, 1] for the channels) or a scalar."""
        if name not in self.constants:
            return False
        v = self.constants.value(name)
        rank = len(self.types[x].shape)
        if v.ndim > rank:
            return False
        if v.size == 1:
            return True
        aligned = (1,) * (rank - v.ndim) + tuple(v.shape)
        return aligned[axis] == self.types[x].shape[axis] and v.size == aligned[axis]

    # --- edit -------------------------------------------------------------------------------------
    def _replace(self, x, region, gamma, beta, eps, xt, axis: int) -> bool:
        dtype = helper.tensor_dtype_to_np_dtype(xt.elem_type)
        exit_name = region[-1].output[0]
        base = exit_name.rsplit(":", 1)[0]
        names = [self.add_initializer(f"{base}_{what}", value.astype(dtype))
                 for what, value in (("gamma", gamma), ("beta", beta))]
        position = max(list(self.graph.node).index(n) for n in region)
        removed = list(region)
        if axis == len(xt.shape) - 1:
            new_nodes = [helper.make_node("LayerNormalization", [x] + names, [exit_name], name=f"{base}_layernorm",
                                          axis=-1, epsilon=float(eps))]
        else:
            new_nodes, cancelled = self._channels_last(x, names, exit_name, base, eps, len(xt.shape))
            removed += cancelled
        for offset, node in enumerate(new_nodes):
            self.graph.node.insert(position + 1 + offset, node)
        remove_value_info(self.graph, [n.output[0] for n in removed if n.output[0] != exit_name])
        remove_nodes(self.graph, removed)
        self.ctx.logger.debug("fuse_layernorm: %d nodes -> LayerNormalization '%s' over axis %d (eps %g)",
                              len(region), new_nodes[0].name, axis, eps)
        return True

    def _channels_last(self, x, names, exit_name: str, base: str, eps: float, rank: int):
        """(nodes, cancelled Transposes): x's channels moved last, normalized, and moved back to
        `exit_name`, unless the exit's only reader is a channels-last Transpose, which the
        LayerNormalization then writes directly."""
        to_last = [0] + list(range(2, rank)) + [1]
        to_first = [0, rank - 1] + list(range(1, rank - 1))
        readers = consumers(self.graph).get(exit_name, [])
        cancelled = []
        if (exit_name not in self.outputs and len(readers) == 1 and readers[0].op_type == "Transpose"
                and self._perm(readers[0]) == to_last):
            cancelled, normalized = readers, readers[0].output[0]
        else:
            normalized = f"{base}_channels_last_normalized"
        nodes = [helper.make_node("Transpose", [x], [f"{base}_channels_last"], name=f"{base}_to_channels_last",
                                  perm=to_last),
                 helper.make_node("LayerNormalization", [f"{base}_channels_last"] + names, [normalized],
                                  name=f"{base}_layernorm", axis=-1, epsilon=float(eps))]
        if not cancelled:
            nodes.append(helper.make_node("Transpose", [normalized], [exit_name], name=f"{base}_to_channels_first",
                                          perm=to_first))
        return nodes, cancelled

    @staticmethod
    def _perm(node) -> List[int]:
        return [int(p) for a in node.attribute if a.name == "perm" for p in helper.get_attribute_value(a)]



_FLOAT_TYPES = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16)

_ELEMENTWISE = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide, "Pow": np.power,
    "Sqrt": np.sqrt, "Reciprocal": np.reciprocal, "Neg": np.negative,
}
