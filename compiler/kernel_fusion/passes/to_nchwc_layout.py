"""Conv chains -> the blocked NCHW8c layout (docs/popef.md, "Internal ops"; the layouts are in
compiler/onnx_graph/nchwc.py), as onnxruntime's NCHWc transformer does: a conv reading and
writing [N, C/8, H, W, 8] runs on whole AVX2 vectors of 8 channels, and a chain of them never
converts in between.

Rewritten, on the main graph only (control-flow bodies keep reading NCHW tensors):

  conv      Conv / FusedConv, 2-D, float32 or float16 (X, W, B and Y one type), constant W (and
            B), static shapes, M % 8 == 0 and
            group 1 or depthwise (group == C == M) -> NchwcConv. The weights are re-laid out
            into a new initializer `<W>__nchwc` (the old one goes when nobody reads it any more),
            auto_pad becomes explicit pads, FusedConv's activation carries over. Its X is read
            blocked when C % 8 == 0 (through ToNchwc if nothing writes it blocked), else plain
            (the RGB stem); FusedConv's Sum is read blocked.
  narrow conv  a conv as above but with M % 8 != 0 (squeeze-and-excite's reduce conv, M = C/4
            or C/24 on the pooled [N, C, 1, 1]), no Sum, whose output is read only as X by
            group-1 convs that fit and is no graph output -> NchwcConv with M padded to whole
            blocks (zero weights and bias: the padded channels hold act(0), finite for every
            activation), its readers NchwcConvs on the padded blocked tensor with zero weights
            for the padded input channels: the squeeze-and-excite branch stays blocked.
  MaxPool   on a tensor written blocked (one output, storage_order 0) -> NchwcMaxPool
            (explicit pads; ceil_mode kept for the output shape). A zero Pad of H and W before
            it (ResNet's stem: Relu -> ZeroPadding2D -> MaxPool), read by nothing else, on a
            MaxPool without pads or ceil_mode of its own, folds into it: NchwcMaxPool with the
            Pad's amounts as pads and zero_pads = 1, so the stem stays blocked.
  AveragePool  on a tensor written blocked -> NchwcAveragePool (explicit pads, ceil_mode as
            MaxPool's, count_include_pad kept): DenseNet's transitions, Inception's pool branches.
  spatial mean  GlobalAveragePool, or ReduceMean over H and W with keepdims, of a tensor written
            blocked -> ReduceMean over axes 2, 3 of [N, C/8, H, W, 8], giving [N, C/8, 1, 1, 8]
            (squeeze-and-excite's squeeze, the classifier's pool): only that small result is
            converted back for its NCHW readers.
  layout-agnostic ops  Add Sub Mul Div Relu Clip Sigmoid Tanh LeakyRelu HardSigmoid HardSwish
            and FusedElementwise whose run-time inputs all have a blocked form of the output's
            shape, the other operands one-element constants; Add Sub Mul Div (which broadcast)
            also take one value per channel: a constant [C, 1, 1] or [1, C, 1, 1] (an unfolded
            BatchNormalization's scale and shift, as DenseNet's pre-activation ones), re-laid out
            into an initializer `<name>__nchwc` [1, C/8, 1, 1, 8], or a run-time [1 or N, C, 1, 1]
            (squeeze-and-excite's excitation), read blocked as [1 or N, C/8, 1, 1, 8] (through a
            ToNchwc, which is small, if nothing writes it blocked). The same node on the blocked
            tensors.
  Concat    on axis 1 of [N, C, H, W] inputs with C % 8 == 0: the same node on their blocked
            forms, a ToNchwc giving one to an input that has none (DenseNet's dense block starts
            from its transition's output and grows by a blocked conv output per layer).
  Pools and means read a tensor written blocked; a node of the last two kinds stays blocked only
  when something written blocked flows into it: one that reads only NCHW tensors (converted for
  a conv elsewhere or not) stays NCHW, so the pass never adds a FromNchwc where the model had no
  blocked chain.

A tensor T written blocked is renamed `T__nchwc`; an NCHW consumer (any other node, a
control-flow body reading it, a graph output) gets `FromNchwc(T__nchwc) -> T`, inserted once,
so they keep their names. ToNchwc is inserted once per tensor too, shared by its blocked readers.

Which tensors have a blocked form is decided before any edit: the convs are chosen first
(their eligibility depends on nothing else), which fixes the tensors that get a ToNchwc, then
the other ops are walked in graph order. A model with no eligible conv is returned untouched,
which also makes a second run a no-op: every eligible conv became an NchwcConv. Anything that
does not fit (dynamic shapes, C % 8 != 0 where blocking needs it, mixed float types...) stays
NCHW. A float16 model (after float_to_half) is blocked like a float32 one: its kernels compute in
float32 and round once per op, as the NCHW ones do."""
import dataclasses
from typing import Dict, List, Optional, Set

import numpy as np
import onnx
from onnx import TensorProto, helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph import nchwc
from compiler.onnx_graph.activations import ACTIVATIONS
from compiler.onnx_graph.constants import is_constant_node
from compiler.onnx_graph.graph_edit import (
    consumers, fresh_name, node_uses, remove_initializers, remove_nodes, remove_value_info,
)
from compiler.onnx_graph.graph_rewrite import GraphRewrite
from compiler.onnx_graph.internal_ops import (
    DOMAIN, ensure_domain_imported, fused_node, nchwc_pool_output_shape,
)
from compiler.onnx_graph.spatial_window import resolve_window
from compiler.onnx_graph.tensor_types import TensorType
from compiler.onnx_graph.topo_order import topological_order
from compiler.onnx_graph.type_inference import infer_types

_DEFAULT_DOMAINS = ("", "ai.onnx")
# Ops computing each element from the same element of their inputs: the layout does not matter.
_ELEMENTWISE = ("Add", "Sub", "Mul", "Div", "Relu", "Clip", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid",
                "HardSwish")
# The ones whose kernels broadcast numpy-style, so an operand of one value per channel broadcasts
# in its blocked shape [1 or N, C/8, 1, 1, 8] as it does in [1 or N, C, 1, 1].
_BROADCASTING = ("Add", "Sub", "Mul", "Div")
_REDUCE_MEAN_SINCE_AXES_INPUT = 18
_POOLS = ("MaxPool", "AveragePool")  # -> NchwcMaxPool, NchwcAveragePool
_SUFFIX = "__nchwc"
_FLOAT_TYPES = (TensorProto.FLOAT, TensorProto.FLOAT16)


@register("to_nchwc_layout", kind="fuse")
def to_nchwc_layout(model, ctx):
    """Rewrite conv chains into the blocked NCHW8c layout (NchwcConv, NchwcMaxPool, ToNchwc/FromNchwc)."""
    if not any(_is_conv(n) for n in model.graph.node):
        return model
    if _Blocker(model, ctx).run():
        ensure_domain_imported(model)
    return model


def _is_conv(node: onnx.NodeProto) -> bool:
    return ((node.op_type == "Conv" and node.domain in _DEFAULT_DOMAINS)
            or (node.op_type == "FusedConv" and node.domain == DOMAIN))


def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _blockable(t: Optional[TensorType]) -> bool:
    """A float32 or float16 static [N, C, H, W] with C % 8 == 0."""
    return _plain_4d(t) and nchwc.can_block(t.shape)


def _plain_4d(t: Optional[TensorType]) -> bool:
    return t is not None and t.elem_type in _FLOAT_TYPES and t.is_static and len(t.shape) == 4


def _per_channel_shape(operand: tuple, out: tuple) -> bool:
    """[1 or N, C, 1, 1] against [N, C, H, W]: one value per channel (and image)."""
    return (len(operand) == 4 and operand[0] in (1, out[0]) and operand[1] == out[1]
            and operand[2] == operand[3] == 1)


@dataclasses.dataclass
class _ConvPlan:
    variant: str
    window: Dict[str, List[int]]  # kernel_shape, strides, dilations, pads (explicit)
    group: int
    activation: str
    activation_params: List[float]
    out_channels: Optional[int] = None  # M padded to whole blocks (a narrow conv), else None
    in_channels: Optional[int] = None   # C padded to whole blocks (reading a narrow conv), else None


class _Blocker(GraphRewrite):
    def __init__(self, model: onnx.ModelProto, ctx):
        super().__init__(model, ctx.model_name)
        self.ctx = ctx
        self.types = infer_types(model, model_name=ctx.model_name).types
        self.nodes = [self.graph.node[i] for i in topological_order(self.graph, ctx.model_name)]
        self.convs: Dict[int, _ConvPlan] = {}     # id(node) -> how it becomes an NchwcConv
        self.pools: Dict[int, list] = {}          # id(MaxPool / AveragePool) -> its Nchwc pool's attributes
        self.pool_inputs: Dict[int, str] = {}     # id(MaxPool) -> the input of the zero Pad folded in
        self.folded: Dict[int, onnx.NodeProto] = {}  # id(Pad) -> the Pad, folded into its MaxPool
        self.kept: Set[int] = set()               # id(node): same node, on blocked tensors
        self.means: Set[int] = set()              # id(GlobalAveragePool / ReduceMean): mean over H, W blocked
        self.channel_constants: Dict[str, str] = {}  # per-channel constant -> its blocked initializer
        self.to_block: Set[str] = set()           # NCHW tensors some rewritten node reads blocked
        self.produced: Set[str] = set()           # tensors now written blocked only (T -> T__nchwc)
        self.blocked_names: Dict[str, str] = {}   # T -> T__nchwc
        self.new_weights: Dict[tuple, str] = {}   # (W, variant, paddings) -> re-laid out initializer

    def run(self) -> bool:
        for node in self.nodes:
            if _is_conv(node):
                plan = self._conv_plan(node)
                if plan is not None:
                    self.convs[id(node)] = plan
        if not self.convs:
            return False
        self._pad_narrow_convs()
        self._choose_blocked_ops()
        self._rewrite()
        return True

    # --- decisions ----------------------------------------------------------------------------
    def _conv_plan(self, node: onnx.NodeProto, narrow: bool = False) -> Optional[_ConvPlan]:
        """How `node` becomes an NchwcConv, or None; with `narrow`, for an M % 8 != 0 conv
        (then only the M check differs)."""
        if len(node.output) != 1 or len(node.input) < 2:
            return None
        x, y = self.types.get(node.input[0]), self.types.get(node.output[0])
        if (not _plain_4d(x) or not (_blockable(y) or (narrow and _plain_4d(y))) or x.elem_type != y.elem_type
                or node.input[1] not in self.constants):
            return None
        w = self.constants.value(node.input[1])
        c, m, dtype = x.shape[1], y.shape[1], helper.tensor_dtype_to_np_dtype(y.elem_type)
        if w.dtype != dtype or w.ndim != 4 or w.shape[0] != m:
            return None
        if len(node.input) > 2 and node.input[2] and not self._is_bias(node.input[2], m, dtype):
            return None
        if len(node.input) > 3 and node.input[3] and self.types.get(node.input[3]) != y:
            return None  # the Sum is read blocked: it must be Y's shape and type
        attrs = _attrs(node)
        group = int(attrs.get("group", 1))
        if group == 1 and w.shape[1] == c:
            variant = nchwc.BLOCKED if c % nchwc.BLOCK == 0 else nchwc.PLAIN_INPUT
        elif group == c == m and c % nchwc.BLOCK == 0 and w.shape[1] == 1:
            variant = nchwc.DEPTHWISE
        else:
            return None
        try:
            window = resolve_window(x.shape[2:], attrs.get("kernel_shape", w.shape[2:]), attrs.get)
        except ValueError:
            return None
        dims = nchwc.conv_output_dims(x.shape[2:], window["kernel_shape"], window["strides"], window["dilations"],
                                      window["pads"])
        if list(window["kernel_shape"]) != list(w.shape[2:]) or dims != tuple(y.shape[2:]):
            return None  # the blocked op's shape would not be the inferred one
        activation = _text(attrs.get("activation", ""))
        params = [float(p) for p in attrs.get("activation_params", [])]
        if activation not in ACTIVATIONS or len(params) != len(ACTIVATIONS[activation].params):
            return None
        return _ConvPlan(variant, window, group, activation, params)

    def _pad_narrow_convs(self) -> None:
        """Narrow convs (M % 8 != 0) read only as X by group-1 convs that are planned: planned
        with M padded to whole blocks, their readers on the padded blocked tensor."""
        readers = consumers(self.graph)
        for node in self.nodes:
            if not _is_conv(node) or id(node) in self.convs or (len(node.input) > 3 and node.input[3]):
                continue
            y = node.output[0] if len(node.output) == 1 else None
            users = readers.get(y, [])
            if (y is None or y in self.outputs or not users
                    or not all(id(u) in self.convs and self.convs[id(u)].variant == nchwc.PLAIN_INPUT
                               and list(u.input).count(y) == 1 and u.input[0] == y for u in users)):
                continue
            plan = self._conv_plan(node, narrow=True)
            if plan is None:
                continue
            padded = -(-self.types[y].shape[1] // nchwc.BLOCK) * nchwc.BLOCK
            plan.out_channels = padded
            self.convs[id(node)] = plan
            for user in users:
                self.convs[id(user)].variant = nchwc.BLOCKED
                self.convs[id(user)].in_channels = padded

    def _is_bias(self, name: str, m: int, dtype) -> bool:
        if name not in self.constants:
            return False
        b = self.constants.value(name)
        return b.dtype == dtype and b.shape == (m,)

    def _choose_blocked_ops(self) -> None:
        """The tensors the convs read blocked, then, in graph order, every node that can stay
        blocked given what is blocked before it."""
        for node in self.nodes:
            plan = self.convs.get(id(node))
            if plan is not None:
                if plan.variant != nchwc.PLAIN_INPUT:
                    self.to_block.add(node.input[0])
                if len(node.input) > 3 and node.input[3]:
                    self.to_block.add(node.input[3])
        readers = consumers(self.graph)
        for node in self.nodes:
            if id(node) in self.convs:
                self.produced.add(node.output[0])
            elif node.op_type == "Pad" and node.domain in _DEFAULT_DOMAINS:
                self._fold_zero_pad(node, readers.get(node.output[0], []))
            elif node.op_type in _POOLS and node.domain in _DEFAULT_DOMAINS and id(node) not in self.pools:
                attrs = self._pool_attrs(node, node.input[0])
                if attrs is not None:
                    self.pools[id(node)] = attrs
                    self.produced.add(node.output[0])
            elif self._spatial_mean(node):
                self.means.add(id(node))
                self.produced.add(node.output[0])
            elif self._stays_blocked(node):
                self.kept.add(id(node))
                self.produced.add(node.output[0])

    def _has_blocked_form(self, name: str) -> bool:
        return name in self.to_block or name in self.produced

    def _fold_zero_pad(self, pad: onnx.NodeProto, readers: List[onnx.NodeProto]) -> None:
        """Pad (constant 0, on H and W only, not negative) -> MaxPool (no pads or ceil_mode of its
        own), the Pad's only reader: one NchwcMaxPool on the Pad's input with zero pads."""
        if (len(readers) != 1 or readers[0].op_type != "MaxPool" or readers[0].domain not in _DEFAULT_DOMAINS
                or pad.output[0] in self.outputs or _text(_attrs(pad).get("mode", "constant")) != "constant"):
            return
        inputs = list(pad.input) + [""] * (4 - len(pad.input))  # data, pads, constant_value, axes (opset >= 11)
        if not inputs[1] or inputs[1] not in self.constants or inputs[3]:
            return
        if inputs[2] and (inputs[2] not in self.constants or np.any(self.constants.value(inputs[2]) != 0)):
            return
        amounts = [int(p) for p in self.constants.value(inputs[1]).reshape(-1)]
        if len(amounts) != 8 or any(amounts[i] for i in (0, 1, 4, 5)) or min(amounts) < 0:
            return
        pool = readers[0]
        own = _attrs(pool)
        if (int(own.get("ceil_mode", 0)) or any(int(p) for p in own.get("pads", []))
                or _text(own.get("auto_pad", "NOTSET")) not in ("NOTSET", "VALID")):
            return
        attrs = self._pool_attrs(pool, pad.input[0], zero_pads=[amounts[2], amounts[3], amounts[6], amounts[7]])
        if attrs is not None:
            self.folded[id(pad)] = pad
            self.pools[id(pool)] = attrs
            self.pool_inputs[id(pool)] = pad.input[0]
            self.produced.add(pool.output[0])

    def _pool_attrs(self, node: onnx.NodeProto, x_name: str,
                    zero_pads: Optional[List[int]] = None) -> Optional[List[onnx.AttributeProto]]:
        """NchwcMaxPool's (NchwcAveragePool's) attributes for MaxPool (AveragePool) `node` reading
        the blocked form of `x_name`; with zero_pads (top, left, bottom, right), those are its pads,
        holding zeros."""
        attrs = _attrs(node)
        if ([o for o in node.output if o] != [node.output[0]] or int(attrs.get("storage_order", 0)) != 0
                or "kernel_shape" not in attrs or x_name not in self.produced):
            return None
        x, y = self.types.get(x_name), self.types.get(node.output[0])
        if not _blockable(x) or not _blockable(y):
            return None
        if zero_pads is not None:
            attrs = {**attrs, "pads": zero_pads, "auto_pad": "NOTSET"}
        try:
            window = resolve_window(x.shape[2:], attrs["kernel_shape"], attrs.get)
        except ValueError:
            return None
        explicit = [helper.make_attribute(k, v) for k, v in window.items()]
        if int(attrs.get("ceil_mode", 0)):
            explicit.append(helper.make_attribute("ceil_mode", 1))
        if zero_pads is not None:
            explicit.append(helper.make_attribute("zero_pads", 1))
        if node.op_type == "AveragePool" and int(attrs.get("count_include_pad", 0)):
            explicit.append(helper.make_attribute("count_include_pad", 1))
        if nchwc_pool_output_shape(nchwc.blocked_shape(x.shape), explicit) != nchwc.blocked_shape(y.shape):
            return None  # ONNX's formula on the explicit window must give the inferred shape
        return explicit

    def _spatial_mean(self, node: onnx.NodeProto) -> bool:
        """GlobalAveragePool, or ReduceMean over H and W keeping them, of a tensor written blocked:
        the blocked mean is a ReduceMean over axes 2, 3 of [N, C/8, H, W, 8]."""
        if node.domain not in _DEFAULT_DOMAINS or len(node.output) != 1 or not node.input:
            return False
        if node.op_type == "ReduceMean":
            attrs = _attrs(node)
            if self.opset >= _REDUCE_MEAN_SINCE_AXES_INPUT:
                if len(node.input) < 2 or node.input[1] not in self.constants:
                    return False
                axes = [int(a) for a in self.constants.value(node.input[1]).reshape(-1)]
            else:
                axes = [int(a) for a in attrs.get("axes", [])]
            if int(attrs.get("keepdims", 1)) != 1 or sorted(a % 4 for a in axes) != [2, 3]:
                return False
        elif node.op_type != "GlobalAveragePool":
            return False
        x, y = self.types.get(node.input[0]), self.types.get(node.output[0])
        return (node.input[0] in self.produced and _blockable(x) and _blockable(y)
                and tuple(y.shape) == (x.shape[0], x.shape[1], 1, 1) and x.elem_type == y.elem_type)

    def _stays_blocked(self, node: onnx.NodeProto) -> bool:
        elementwise = ((node.op_type in _ELEMENTWISE and node.domain in _DEFAULT_DOMAINS)
                       or (node.op_type == "FusedElementwise" and node.domain == DOMAIN))
        concat = node.op_type == "Concat" and node.domain in _DEFAULT_DOMAINS
        if not (elementwise or concat) or len(node.output) != 1 or not _blockable(self.types.get(node.output[0])):
            return False
        runtime = [i for i in node.input if i and i not in self.constants]
        if not any(i in self.produced for i in runtime):
            return False  # it would only add conversions: nothing blocked flows into it
        if concat:  # inputs not written blocked get a ToNchwc (DenseNet: the pooled input of a dense block)
            return (int(_attrs(node).get("axis", 0)) in (1, -3) and len(runtime) == len(node.input)
                    and all(_blockable(self.types.get(i)) for i in runtime))
        shape = tuple(self.types[node.output[0]].shape)
        per_channel = node.op_type in _BROADCASTING and node.domain in _DEFAULT_DOMAINS
        constants_ok = all(self._scalar_constant(i) or (per_channel and self._channel_constant(i, shape))
                           for i in node.input if i and i in self.constants)
        return constants_ok and all(self._blocked_operand(i, shape)
                                    or (per_channel and self._channel_operand(i, shape)) for i in runtime)

    def _blocked_operand(self, name: str, shape) -> bool:
        """A run-time tensor with a blocked form (of `shape`, unless None)."""
        t = self.types.get(name)
        return self._has_blocked_form(name) and _blockable(t) and (shape is None or tuple(t.shape) == tuple(shape))

    def _channel_operand(self, name: str, shape) -> bool:
        """A run-time [1 or N, C, 1, 1] of an [N, C, H, W] op (squeeze-and-excite's scales): its
        blocked form, [1 or N, C/8, 1, 1, 8], broadcasts over the blocked output. A ToNchwc
        writes it if nothing does (it is small)."""
        t = self.types.get(name)
        return _blockable(t) and _per_channel_shape(tuple(t.shape), shape)

    def _scalar_constant(self, name: str) -> bool:
        """One element, of a rank that broadcasts with the blocked rank 5 as with the NCHW rank 4."""
        value = self.constants.value(name)
        return value.size == 1 and value.ndim <= 4

    def _channel_constant(self, name: str, shape) -> bool:
        """[C, 1, 1] or [1, C, 1, 1] of an [N, C, H, W] op (an unfolded BatchNormalization's scale
        and shift): re-laid out as [1, C/8, 1, 1, 8]."""
        value = self.constants.value(name)
        return value.ndim in (3, 4) and value.shape[-3:] == (shape[1], 1, 1) and value.size == shape[1]

    # --- edits --------------------------------------------------------------------------------
    def _rewrite(self) -> None:
        replaced = {n.input[1] for n in self.nodes if id(n) in self.convs}
        replaced.update(n.input[2] for n in self.nodes  # narrow convs' biases, padded
                        if id(n) in self.convs and self.convs[id(n)].out_channels and len(n.input) > 2 and n.input[2])
        replaced.update(i for pad in self.folded.values() for i in pad.input[1:] if i)  # pads, value
        replaced.update(i for n in self.nodes if id(n) in self.means for i in n.input[1:] if i)  # axes
        replaced.update(i for n in self.nodes if id(n) in self.kept for i in n.input
                        if i in self.constants and not self._scalar_constant(i))  # per-channel constants
        emitted: List[onnx.NodeProto] = []
        converted: Set[str] = set()  # tensors a ToNchwc already reads / FromNchwc already writes

        def blocked(name: str) -> str:
            """The blocked form a rewritten node reads, adding its ToNchwc the first time."""
            if name not in self.produced and name not in converted:
                converted.add(name)
                emitted.append(helper.make_node("ToNchwc", [name], [self._blocked_name(name)],
                                                name=f"{name}/to_nchwc", domain=DOMAIN))
            return self._blocked_name(name)

        def plain(name: str) -> None:
            """An NCHW reader of `name`: a FromNchwc writes it the first time it is needed."""
            if name in self.produced and name not in converted:
                converted.add(name)
                emitted.append(helper.make_node("FromNchwc", [self._blocked_name(name)], [name],
                                                name=f"{name}/from_nchwc", domain=DOMAIN))

        for node in self.nodes:
            if id(node) in self.convs:
                emitted.append(self._nchwc_conv(node, self.convs[id(node)], blocked, plain))
            elif id(node) in self.folded:
                continue  # the zero Pad: its MaxPool's NchwcMaxPool pads with zeros itself
            elif id(node) in self.pools:
                x = self.pool_inputs.get(id(node), node.input[0])
                pool = helper.make_node("Nchwc" + node.op_type, [blocked(x)], [self._blocked_name(node.output[0])],
                                        name=node.name, domain=DOMAIN)
                pool.attribute.extend(self.pools[id(node)])
                emitted.append(pool)
            elif id(node) in self.means:
                emitted.append(self._blocked_mean(node, blocked))
            elif id(node) in self.kept:
                emitted.append(self._on_blocked(node, blocked))
            else:
                for name in node_uses(node):
                    plain(name)
                emitted.append(node)
        for out in self.graph.output:
            plain(out.name)
        self._replace_nodes(emitted)
        self._drop_unread(replaced)
        produced_now = {o for n in self.graph.node for o in n.output}
        remove_value_info(self.graph, [t for t in self.produced if t not in produced_now] +
                          [pad.output[0] for pad in self.folded.values()])
        self.ctx.logger.debug("to_nchwc_layout: %d convs, %d pools (%d zero Pads folded in), %d spatial means, "
                              "%d other ops blocked; %d ToNchwc, %d FromNchwc", len(self.convs), len(self.pools),
                              len(self.folded), len(self.means), len(self.kept),
                              sum(n.op_type == "ToNchwc" for n in emitted),
                              sum(n.op_type == "FromNchwc" for n in emitted))

    def _blocked_name(self, name: str) -> str:
        if name not in self.blocked_names:
            self.blocked_names[name] = fresh_name(name + _SUFFIX, self.taken)
        return self.blocked_names[name]

    def _nchwc_conv(self, node: onnx.NodeProto, plan: _ConvPlan, blocked, plain) -> onnx.NodeProto:
        x = node.input[0]
        if plan.variant == nchwc.PLAIN_INPUT:
            plain(x)
        else:
            x = blocked(x)
        bias = node.input[2] if len(node.input) > 2 else ""
        if bias and plan.out_channels:
            bias = self._padded_bias(bias, plan.out_channels)
        inputs = [x, self._weights(node.input[1], plan),
                  bias,
                  blocked(node.input[3]) if len(node.input) > 3 and node.input[3] else ""]
        window = helper.make_node("Conv", [], [], group=plan.group, **plan.window)  # the attributes to take
        return fused_node("NchwcConv", inputs, self._blocked_name(node.output[0]), node.name, window,
                          plan.activation, plan.activation_params)

    def _weights(self, name: str, plan: _ConvPlan) -> str:
        key = (name, plan.variant, plan.out_channels, plan.in_channels)
        if key not in self.new_weights:
            w = self.constants.value(name)
            if plan.out_channels or plan.in_channels:  # zeros for the padded output / input channels
                w = np.pad(w, [(0, (plan.out_channels or w.shape[0]) - w.shape[0]),
                               (0, (plan.in_channels or w.shape[1]) - w.shape[1]), (0, 0), (0, 0)])
            self.new_weights[key] = self.add_initializer(name + _SUFFIX, nchwc.block_weights(w, plan.variant))
        return self.new_weights[key]

    def _padded_bias(self, name: str, size: int) -> str:
        """A narrow conv's bias [M] with zeros up to `size`."""
        key = (name, "bias", size)
        if key not in self.new_weights:
            value = self.constants.value(name)
            self.new_weights[key] = self.add_initializer(name + _SUFFIX, np.pad(value, (0, size - value.shape[0])))
        return self.new_weights[key]

    def _on_blocked(self, node: onnx.NodeProto, blocked) -> onnx.NodeProto:
        """The same node reading and writing blocked tensors (scalar constants as they are,
        per-channel ones re-laid out)."""
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        for i, name in enumerate(node.input):
            if name and name not in self.constants:
                copy.input[i] = blocked(name)
            elif name and not self._scalar_constant(name):
                copy.input[i] = self._blocked_channel_constant(name)
        copy.output[0] = self._blocked_name(node.output[0])
        if node.op_type == "Concat":
            for attr in copy.attribute:
                if attr.name == "axis":
                    attr.i = 1  # -3 would be H in the blocked rank 5
        return copy

    def _blocked_channel_constant(self, name: str) -> str:
        if name not in self.channel_constants:
            value = self.constants.value(name)
            c = value.size
            self.channel_constants[name] = self.add_initializer(
                name + _SUFFIX, value.reshape(1, c // nchwc.BLOCK, 1, 1, nchwc.BLOCK))
        return self.channel_constants[name]

    def _blocked_mean(self, node: onnx.NodeProto, blocked) -> onnx.NodeProto:
        """ReduceMean over H and W (axes 2, 3) of the blocked tensor, keeping them."""
        inputs, attrs = [blocked(node.input[0])], {"keepdims": 1}
        if self.opset >= _REDUCE_MEAN_SINCE_AXES_INPUT:
            inputs.append(self.add_initializer(node.output[0] + "__axes", np.array([2, 3], np.int64)))
        else:
            attrs["axes"] = [2, 3]
        return helper.make_node("ReduceMean", inputs, [self._blocked_name(node.output[0])], name=node.name, **attrs)

    def _replace_nodes(self, nodes: List[onnx.NodeProto]) -> None:
        # The list mixes new nodes and the graph's own: copy them all before clearing the graph,
        # which would otherwise take the kept ones with it.
        copies = []
        for node in nodes:
            copy = onnx.NodeProto()
            copy.CopyFrom(node)
            copies.append(copy)
        del self.graph.node[:]
        self.graph.node.extend(copies)

    def _drop_unread(self, names: Set[str]) -> None:
        """The replaced constants nobody reads any more (old weights, folded Pads' amounts): initializers,
        or Constant nodes."""
        read = {o.name for o in self.graph.output}
        for node in self.graph.node:
            read.update(node_uses(node))
        unread = names - read
        remove_initializers(self.graph, [t.name for t in self.graph.initializer if t.name in unread])
        remove_nodes(self.graph, [n for n in self.graph.node if is_constant_node(n) and n.output[0] in unread])
