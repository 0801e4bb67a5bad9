"""Per-head scaled dot-product attention -> one FusedAttention node (docs/popef.md "Internal ops").

tf2onnx writes the attention of Keras' MultiHeadAttention (BERT, ViT) as views and Transposes
that move each projection's [B, S, H·d] output to [B·H, S, d] (keys to [B·H, d, S]), a batched
MatMul for the scores, Softmax over the last axis, a MatMul with the values, and views and a
Transpose back to [B, S, H·d]. The runtime ran that as about a dozen steps, four of them copies
and one a [B, H, S, S] score tensor written and read back.

The pass anchors on a last-axis Softmax whose input is, through views (Reshape, Squeeze,
Unsqueeze, Flatten, Identity) and Mul/Div by positive scalar constants (the scale, when
fold_scale_into_matmul left it), the output of a batched MatMul A·B (the scores), and whose
output reaches, through views, the left operand of a second batched MatMul P·C. Every tensor in
between has that one reader. The three operands A, B, C are then traced back through layout ops
(views and Transposes), and the output P·C forward through them: since those ops only move
elements, each chain is evaluated on an array of element indices, and a chain qualifies when it
moves a [B, S, H, d] source (flat order) exactly to the MatMul's [..., S, d] (queries, values) or
[..., d, S] (keys) operand, and the product to a [B, Sq, H, dv] result. The furthest such source
and result are taken, so the head transposes on both sides disappear; B and H come from the
head count that matches all four and leaves out the most layout nodes. The region becomes
FusedAttention(Q, K, V; num_heads, scale) on [B, S, H·d] views of the sources (Reshapes, which are
views in the runtime), writing a view of the result. What no longer has a reader (the old
chains) is removed.

A pattern that does not match exactly (an attention mask Add, a broadcast MatMul, heads laid
out another way) is left as it is."""
import functools
from typing import List, Optional, Sequence, Set, Tuple

import numpy as np
import onnx
from onnx import helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph.graph_edit import consumers, fresh_name, producers, remove_nodes, remove_value_info
from compiler.onnx_graph.graph_rewrite import GraphRewrite
from compiler.onnx_graph.internal_ops import DOMAIN, ensure_domain_imported
from compiler.onnx_graph.type_inference import infer_types

_DEFAULT_DOMAINS = ("", "ai.onnx")
_VIEWS = ("Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity")
_LAYOUT = _VIEWS + ("Transpose",)
_FLOAT_TYPES = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16)


@register("fuse_attention", kind="fuse")
def fuse_attention(model, ctx):
    """Fuse per-head scaled dot-product attention (head transposes, Q·Kᵀ, Softmax, ·V) into FusedAttention."""
    if not any(n.op_type == "Softmax" for n in model.graph.node):
        return model
    fuser = _AttentionFuser(model, ctx.model_name)
    fused = sum(fuser.try_softmax(n) for n in list(model.graph.node) if n.op_type == "Softmax")
    if fused:
        fuser.remove_unread()
        ensure_domain_imported(model)
    return model


class _AttentionFuser(GraphRewrite):
    def __init__(self, model: onnx.ModelProto, model_name: str):
        super().__init__(model, model_name)
        self.types = infer_types(model, model_name=model_name).types
        self.traced: Set[str] = set()  # outputs of the layout nodes a fused region read through

    def _shape(self, name: str) -> Optional[Tuple[int, ...]]:
        t = self.types.get(name)
        return tuple(t.shape) if t is not None and t.is_static else None

    def _only_reader(self, name: str, readers) -> Optional[onnx.NodeProto]:
        r = readers.get(name, [])
        return r[0] if len(r) == 1 and name not in self.outputs else None

    # --- the region around one Softmax ------------------------------------------------------------
    def try_softmax(self, softmax: onnx.NodeProto) -> bool:
        if softmax.domain not in _DEFAULT_DOMAINS:
            return False
        made, readers = producers(self.graph), consumers(self.graph)
        x_shape = self._shape(softmax.input[0])
        if x_shape is None or len(x_shape) < 1 or not self._last_axis_softmax(softmax, len(x_shape)):
            return False
        # back to the scores MatMul through views and scalar scales
        scale, region, name = 1.0, [softmax], softmax.input[0]
        while True:
            node, reader = made.get(name), self._only_reader(name, readers)
            if (node is None or node.domain not in _DEFAULT_DOMAINS or reader is None
                    or reader.output[0] != region[-1].output[0]):
                return False
            region.append(node)
            if node.op_type == "MatMul":
                scores = node
                break
            if node.op_type in ("Mul", "Div"):
                factor, other = self._scalar_operand(node)
                if factor is None or factor <= 0 or (node.op_type == "Div" and node.input[0] != other):
                    return False
                scale *= factor if node.op_type == "Mul" else 1.0 / factor
                name = other
            elif node.op_type in _VIEWS:
                name = node.input[0]
            else:
                return False
        # forward to the P·V MatMul through views
        name = softmax.output[0]
        while True:
            node = self._only_reader(name, readers)
            if node is None or node.domain not in _DEFAULT_DOMAINS:
                return False
            region.append(node)
            if node.op_type == "MatMul" and node.input[0] == name:
                product = node
                break
            if node.op_type not in _VIEWS:
                return False
            name = node.output[0]
        return self._fuse(scores, product, region, scale, x_shape[-1], made, readers)

    def _last_axis_softmax(self, node: onnx.NodeProto, rank: int) -> bool:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        axis = int(attrs.get("axis", -1 if self.opset >= 13 else 1))
        return axis % rank == rank - 1 if rank else False

    def _scalar_operand(self, node: onnx.NodeProto) -> Tuple[Optional[float], str]:
        """(the scalar constant operand's value, the other operand) of a binary node."""
        for const, other in ((node.input[1], node.input[0]), (node.input[0], node.input[1])):
            if const in self.constants and other not in self.constants:
                v = self.constants.value(const)
                if v.size == 1:
                    return float(v.reshape(-1)[0]), other
        return None, ""

    # --- operands and result: index-map tracing -------------------------------------------------
    def _fuse(self, scores, product, region, scale, softmax_len, made, readers) -> bool:
        a, b = self._shape(scores.input[0]), self._shape(scores.input[1])
        p, c = self._shape(product.input[0]), self._shape(product.input[1])
        if None in (a, b, p, c) or min(len(a), len(b), len(p), len(c)) < 3:
            return False
        if a[:-2] != b[:-2] or p[:-2] != c[:-2] or a[-1] != b[-2] or p[-1] != c[-2]:
            return False  # broadcast or mismatched batch dims
        sq, d, sk, dv = a[-2], a[-1], b[-1], c[-1]
        groups = int(np.prod(a[:-2]))
        if p[-2:] != (sq, sk) or int(np.prod(p[:-2])) != groups or softmax_len != sk or min(sq, sk, d, dv) < 1:
            return False
        dtypes = {self.types[n].elem_type for n in (scores.input[0], scores.input[1], product.input[1])}
        if len(dtypes) != 1 or dtypes.pop() not in _FLOAT_TYPES:
            return False
        q_chains = self._sources(scores.input[0], made)
        k_chains = self._sources(scores.input[1], made)
        v_chains = self._sources(product.input[1], made)
        y_chains = self._results(product.output[0], readers)
        # Each source's (result's) elements moved along its chain, once for every head count.
        q_moved, k_moved, v_moved = (self._moved_sources(chains) for chains in (q_chains, k_chains, v_chains))
        y_moved = self._moved_results(y_chains)
        best = None  # (layout nodes left out, heads, [q, k, v, y]): the head count that leaves out the most
        for heads in (h for h in range(1, groups + 1) if groups % h == 0):
            batch = groups // heads
            found = [_furthest(q_moved, lambda i: _rows_operand(i, heads, sq, d)),
                     _furthest(k_moved, lambda i: _columns_operand(i, heads, sk, d)),
                     _furthest(v_moved, lambda i: _rows_operand(i, heads, sk, dv)),
                     _furthest(y_moved, lambda i: _result(i, heads, sq, dv))]
            if None in found:
                continue
            reach = sum(steps for _, steps in found)
            if best is None or reach > best[0]:
                best = (reach, heads, [name for name, _ in found])
        if best is None:
            return False
        _, heads, (q, k, v, y) = best
        self.traced |= {n.output[0] for chains in (q_chains, k_chains, v_chains) for _, chain in chains for n in chain}
        self._replace(region, [q, k, v], y, groups // heads, heads, (sq, sk, d, dv), scale)
        return True

    def _sources(self, operand: str, made) -> List[Tuple[str, List[onnx.NodeProto]]]:
        """(source, the layout nodes from it to `operand`), nearest source first."""
        chains, chain, name = [(operand, [])], [], operand
        while True:
            node = made.get(name)
            if (node is None or node.domain not in _DEFAULT_DOMAINS or node.op_type not in _LAYOUT
                    or self._shape(node.input[0]) is None):
                return chains
            chain = [node] + chain
            name = node.input[0]
            chains.append((name, list(chain)))

    def _results(self, product_out: str, readers) -> List[Tuple[str, List[onnx.NodeProto]]]:
        """(result, the layout nodes from the product to it), furthest result first."""
        chains, chain, name = [(product_out, [])], [], product_out
        while True:
            node = self._only_reader(name, readers)
            if (node is None or node.domain not in _DEFAULT_DOMAINS or node.op_type not in _LAYOUT
                    or self._shape(node.output[0]) is None):
                return chains[::-1]
            chain = chain + [node]
            name = node.output[0]
            chains.append((name, list(chain)))

    def _moved_sources(self, chains) -> List[Tuple[str, int, Optional[np.ndarray]]]:
        """(source, chain length, the source's flat element indices moved along the chain to the
        operand), furthest source first."""
        moved = []
        for source, chain in reversed(chains):
            shape = self._shape(source)
            ok = shape is not None and self.types[source].elem_type in _FLOAT_TYPES
            got = self._move(_indices(int(np.prod(shape))).reshape(shape), chain) if ok else None
            moved.append((source, len(chain), got))
        return moved

    def _moved_results(self, chains) -> List[Tuple[str, int, Optional[np.ndarray]]]:
        """(result, chain length, the result's elements as flat indices of the product, flat),
        furthest result first."""
        product_shape = self._shape(chains[-1][0])
        moved = []
        for result, chain in chains:
            got = self._move(_indices(int(np.prod(product_shape))).reshape(product_shape), chain)
            moved.append((result, len(chain), None if got is None else got.reshape(-1)))
        return moved

    def _move(self, x: np.ndarray, chain: Sequence[onnx.NodeProto]) -> Optional[np.ndarray]:
        """x moved by the layout nodes in `chain` (None if one cannot be evaluated statically)."""
        for node in chain:
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            op = node.op_type
            if op == "Identity":
                continue
            if op == "Transpose":
                x = x.transpose(attrs.get("perm", list(range(x.ndim))[::-1]))
            elif op == "Flatten":
                axis = int(attrs.get("axis", 1)) % (x.ndim + 1) if x.ndim else 0
                x = x.reshape(int(np.prod(x.shape[:axis])), -1)
            elif op == "Reshape":
                if len(node.input) < 2 or node.input[1] not in self.constants:
                    return None
                target = [int(s) for s in self.constants.value(node.input[1]).reshape(-1)]
                if not attrs.get("allowzero", 0):
                    target = [x.shape[i] if s == 0 else s for i, s in enumerate(target)]
                try:
                    x = x.reshape(target)
                except ValueError:
                    return None
            else:  # Squeeze / Unsqueeze: the output's static shape says where the size-1 axes go
                shape = self._shape(node.output[0])
                if shape is None or int(np.prod(shape)) != x.size:
                    return None
                x = x.reshape(shape)
        return x

    # --- edit -------------------------------------------------------------------------------------
    def _replace(self, region, sources, result, batch, heads, sizes, scale) -> None:
        sq, sk, d, dv = sizes
        base = result.rsplit(":", 1)[0]
        nodes, inputs = [], []
        for source, rows, width, what in zip(sources, (sq, sk, sk), (d, d, dv), ("query", "key", "value")):
            if self._shape(source) == (batch, rows, heads * width):
                inputs.append(source)
                continue
            view = fresh_name(f"{base}_attention_{what}", self.taken)
            shape = self.add_initializer(f"{view}_shape", np.array([batch, rows, heads * width], np.int64))
            nodes.append(helper.make_node("Reshape", [source, shape], [view], name=view))
            inputs.append(view)
        y_shape = (batch, sq, heads * dv)
        y = result if self._shape(result) == y_shape else fresh_name(f"{base}_attention", self.taken)
        attention = helper.make_node("FusedAttention", inputs, [y], name=f"{base}_attention", domain=DOMAIN,
                                     num_heads=heads)
        if scale != 1.0:
            attention.attribute.append(helper.make_attribute("scale", float(scale)))
        nodes.append(attention)
        if y != result:
            shape = self.add_initializer(f"{base}_attention_shape", np.array(self._shape(result), np.int64))
            nodes.append(helper.make_node("Reshape", [y, shape], [result], name=f"{base}_attention_view"))
        # Everything from the scores to the result goes; the new nodes take the result's place.
        readers = consumers(self.graph)
        doomed, name = list(region), region[-1].output[0]
        while name != result:
            node = self._only_reader(name, readers)
            doomed.append(node)
            name = node.output[0]
        position = list(self.graph.node).index(doomed[-1]) + 1
        for i, node in enumerate(nodes):
            self.graph.node.insert(position + i, node)
        remove_nodes(self.graph, doomed)
        remove_value_info(self.graph, [n.output[0] for n in doomed if n.output[0] != result])

    def remove_unread(self) -> None:
        """Drops the layout nodes nothing reads any more (the old head transposes)."""
        while True:
            readers = consumers(self.graph)
            dead = [n for n in self.graph.node if n.output[0] in self.traced
                    and not any(readers.get(o) or o in self.outputs for o in n.output)]
            if not dead:
                return
            remove_nodes(self.graph, dead)
            remove_value_info(self.graph, [o for n in dead for o in n.output])


@functools.lru_cache(maxsize=4)
def _indices(n: int) -> np.ndarray:
    """0..n-1, shared read-only (the layout chains only view and copy it)."""
    values = np.arange(n, dtype=np.int64)
    values.flags.writeable = False
    return values


def _furthest(moved, expected) -> Optional[Tuple[str, int]]:
    """(name, chain length) of the first entry of `moved` whose element indices are
    expected(flat positions) at every position (checked on a sample first)."""
    for name, steps, got in moved:
        if got is None:
            continue
        probe = np.random.default_rng(0).integers(0, got.size, 256)  # most mismatches show at a random sample
        if (np.array_equal(got.flat[probe], expected(probe))
                and np.array_equal(got.reshape(-1), expected(_indices(got.size)))):
            return name, steps
    return None


# The source index ((b·S + s)·H + h)·width + j (a [B, S, H, width] tensor) that position i of
# an operand holds, B·H = G groups with g = b·H + h.
def _rows_operand(i: np.ndarray, heads: int, rows: int, width: int) -> np.ndarray:
    """Operand [G, rows, width] (queries, values)."""
    g, s, j = i // (rows * width), i // width % rows, i % width
    return ((g // heads * rows + s) * heads + g % heads) * width + j


def _columns_operand(i: np.ndarray, heads: int, cols: int, width: int) -> np.ndarray:
    """Operand [G, width, cols] (keys, transposed)."""
    g, j, s = i // (width * cols), i // cols % width, i % cols
    return ((g // heads * cols + s) * heads + g % heads) * width + j


def _result(i: np.ndarray, heads: int, rows: int, width: int) -> np.ndarray:
    """The product [G, rows, width] index that position i of a [B, rows, H, width] result holds."""
    b, s, h, j = i // (rows * heads * width), i // (heads * width) % rows, i // width % heads, i % width
    return ((b * heads + h) * rows + s) * width + j
