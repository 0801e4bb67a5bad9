"""The compiler's internal ONNX ops (domain `ai.tfpopef`), written by the fusion passes and
lowered to the runtime kernels of the same name (docs/popef.md, "Internal ops"):

  FusedConv(X, W, [B], [Sum])    Conv's attributes
  FusedGemm(A, B, [C], [Sum])    Gemm's attributes
  FusedMatMul(A, B, [Bias], [Sum])  optional `alpha`: Y = activation(alpha·A·B + Bias + Sum)

Y = activation(op(...) + Sum), `activation` one of onnx_graph/activations.py's ACTIVATIONS with
`activation_params`; the
optional inputs are present as named inputs or "" (ONNX's convention for a missing optional).

  FusedElementwise(X0, X1, ...)  attribute `program`: a chain of elementwise ops run as one loop
                                 (text form: fuse_elementwise_chain.py, the runtime's
                                 elementwise_program.h); X0 has the output's shape and type, the
                                 others that shape, [N] (the last dim) or one element.

The NCHW8c blocked layout (compiler/onnx_graph/nchwc.py; written by to_nchwc_layout), float32
or float16 (all of a node's tensors one type, except NchwcWinogradConv's U), a blocked tensor
being [N, C/8, H, W, 8]:

  ToNchwc(X)                     [N, C, H, W] (C % 8 == 0) -> [N, C/8, H, W, 8]
  FromNchwc(X)                   [N, Cb, H, W, 8] -> [N, Cb*8, H, W]
                                 (both: channels_last = 1 makes the plain side [N, H, W, C], a
                                 Transpose folded in by fold_transposes_into_nchwc_reorders)
  NchwcConv(X, W, [B], [Sum])    kernel_shape strides dilations pads group + the epilogue's
                                 attributes; X blocked (group 1: W [M/G, C/8, KH, KW, 8, G],
                                 G = 16 output channels per group when M % 16 == 0, else 8;
                                 group C: depthwise, W [C/8, KH, KW, 8]) or plain [N, C, H, W]
                                 (group 1, W [M/G, C, KH, KW, G]) or, channels_last = 1, [N, H, W, C]
                                 with C = 1 or 3 (group 1, W [M/G, KH, KW, C, G]: the stem reading the
                                 NHWC input, folded by fold_input_transpose_into_nchwc_conv); B [M];
                                 Sum and Y blocked
  NchwcConv(X, W, [B], [Sum], S)  the same, group 1 on a blocked X, convolving X·S: S [N, C/8,
                                 1, 1, 8] scales each image's input channels (squeeze-and-excite's
                                 excitation, folded by fold_channel_scale_into_nchwc_conv)
  NchwcWinogradConv(X, U, [B], [Sum])  pads + the epilogue's attributes: a 3x3, stride-1 NchwcConv
                                 as Winograd's F(m x m, 3x3) (compiler/onnx_graph/winograd.py), U
                                 the transformed weights [(m+2)², M/G, C/8, 8, G] (float32 or float16
                                 whatever X's type: the pass writes float32); X, Sum, Y blocked
  NchwcInvertedResidual(X, We, Be, Wd, Bd[, Wp, Bp])  expand 1x1 -> depthwise [-> project 1x1 [+ X]]
                                 in one step (compiler/onnx_graph/inverted_residual.py)
  NchwcMaxPool(X)                kernel_shape strides dilations pads, ceil_mode (only for Y's
                                 shape, ONNX's MaxPool formula), zero_pads (1: the pads hold
                                 zeros, a folded Pad); X and Y blocked
  NchwcAveragePool(X)            kernel_shape strides dilations pads, ceil_mode (as NchwcMaxPool),
                                 count_include_pad (as AveragePool); X and Y blocked

A depthwise convolution on channels-last activations (written by fuse_channels_last_depthwise
for ConvNeXt's blocks, whose residual stream is channels last), float32 or float16:

  ChannelsLastDepthwiseConv(X, W, [B], [Scale], [LnBias])  kernel_shape strides dilations pads,
                                 layer_norm (1: Y is LayerNormalization over C of the
                                 convolution, with Scale, LnBias and epsilon), epsilon; X [N, H,
                                 W, C] (C % 8 == 0), W NchwcConv's depthwise [C/8, KH, KW, 8], B,
                                 Scale, LnBias [C] -> Y [N, OH, OW, C]

FusedAttention (written by fuse_attention), float32 or float16:

  FusedAttention(Q, K, V)        num_heads H, scale (default 1): per batch and head,
                                 softmax(scale·Q·Kᵀ)·V with Q [B, Sq, H·d], K [B, Sk, H·d],
                                 V [B, Sk, H·dv] (head h = the slice [h·d, (h+1)·d) of a row)
                                 -> Y [B, Sq, H·dv]
  FusedAttention(QKV)            the same plus qkv_widths [wq, wk, wv] (written by
                                 merge_qkv_projections): self-attention whose Q, K and V are the
                                 column ranges of QKV [B, S, wq + wk + wv], in that order

The ops are registered with ONNX's schema registry (importing this module does it once per
process) with a type-and-shape inference function (the fused ops run the base op's own
inference), so onnx.checker and shape inference handle a fused model like any other."""
from typing import Dict, List, Optional, Sequence

import onnx
from onnx import defs, helper

from compiler.onnx_graph import inverted_residual, nchwc, winograd
from compiler.onnx_graph.activations import ACTIVATIONS
from compiler.onnx_graph.spatial_window import resolve_window

DOMAIN = "ai.tfpopef"
VERSION = 1

# Fused op -> (the base ONNX op whose attributes and output type it has, the base op's input count).
FUSED_OPS: Dict[str, tuple] = {"FusedConv": ("Conv", 3), "FusedGemm": ("Gemm", 3), "FusedMatMul": ("MatMul", 2)}
_EPILOGUE_ATTRS = ("activation", "activation_params")
_BASE_OPSET = 17  # the base ops' inference, as of this opset (their semantics have not changed since)


def _base_output_type(base_op: str, inputs: Sequence[str], types: Dict[str, bytes],
                      attrs: Sequence[onnx.AttributeProto]) -> Optional[onnx.TypeProto]:
    """ONNX's own inference of a `base_op` node reading `inputs` (name -> serialized TypeProto)."""
    node = helper.make_node(base_op, list(inputs), ["out"])
    node.attribute.extend(attrs)
    out = defs.get_schema(base_op, _BASE_OPSET)._infer_node_outputs(node.SerializeToString(), types,
                                                                    opsetImports={"": _BASE_OPSET})
    return onnx.TypeProto.FromString(out["out"]) if "out" in out else None


def _infer(base_op: str, base_inputs: int):
    def infer(ctx) -> None:
        # The output type is the base op's: rebuild the base node (its inputs, its attributes)
        # and run ONNX's own inference on it.
        names = [f"in{i}" for i in range(min(base_inputs, ctx.get_num_inputs()))]
        types = {}
        for i, name in enumerate(names):
            if not ctx.has_input(i):
                names[i] = ""
                continue
            t = ctx.get_input_type(i)
            if t is None:
                return
            types[name] = t.SerializeToString()
        while names and names[-1] == "":
            names.pop()
        attrs = [a for a in (ctx.get_attribute(n) for n in _BASE_ATTRS[base_op]) if a is not None]
        out = _base_output_type(base_op, names, types, attrs)
        if out is not None:
            ctx.set_output_type(0, out)

    return infer


_BASE_ATTRS = {op: tuple(defs.get_schema(op, _BASE_OPSET).attributes) for op, _ in FUSED_OPS.values()}


def _make_schema(name: str, base_op: str, base_inputs: int) -> defs.OpSchema:
    base = defs.get_schema(base_op, _BASE_OPSET)
    fp = defs.OpSchema.FormalParameter
    optional = defs.OpSchema.FormalParameterOption.Optional
    inputs = [fp(p.name, "T", p.description, param_option=optional if i >= 2 else p.option)
              for i, p in enumerate(base.inputs)]
    if len(inputs) == 2:
        inputs.append(fp("Bias", "T", "added to every row", param_option=optional))
    inputs.append(fp("Sum", "T", "added before the activation (same shape as Y)", param_option=optional))
    attr = defs.OpSchema.Attribute
    attrs = [attr(a.name, a.type, a.description, required=a.required) for a in base.attributes.values()]
    if base_op == "MatMul":
        attrs.append(attr("alpha", defs.OpSchema.AttrType.FLOAT, "A·B's scalar factor (default 1)", required=False))
    attrs.append(attr("activation", defs.OpSchema.AttrType.STRING, "epilogue activation", required=False))
    attrs.append(attr("activation_params", defs.OpSchema.AttrType.FLOATS, "its parameters", required=False))
    schema = defs.OpSchema(name, DOMAIN, VERSION, f"{base_op} + bias + sum + activation (tf-popef internal op)",
                           inputs=inputs, outputs=[fp("Y", "T", "")],
                           type_constraints=[("T", ["tensor(float)", "tensor(float16)"], "float types")],
                           attributes=attrs)
    schema.set_type_and_shape_inference_function(_infer(base_op, base_inputs))
    return schema


def _elementwise_schema() -> defs.OpSchema:
    fp = defs.OpSchema.FormalParameter
    schema = defs.OpSchema(
        "FusedElementwise", DOMAIN, VERSION, "a chain of elementwise ops in one loop (tf-popef internal op)",
        inputs=[fp("X", "T", "X0 has the output's shape; the others that shape, [N] or one element",
                   param_option=defs.OpSchema.FormalParameterOption.Variadic, is_homogeneous=True, min_arity=1)],
        outputs=[fp("Y", "T", "")],
        type_constraints=[("T", ["tensor(float)", "tensor(float16)"], "float types")],
        attributes=[defs.OpSchema.Attribute("program", defs.OpSchema.AttrType.STRING, "the instructions",
                                            required=True)])

    def infer(ctx) -> None:
        t = ctx.get_input_type(0)
        if t is not None:
            ctx.set_output_type(0, t)

    schema.set_type_and_shape_inference_function(infer)
    return schema


# --- the NCHW8c blocked layout --------------------------------------------------------------------
# Their inference functions never raise (an exception would escape ONNX's non-strict inference):
# shapes that fit no layout leave the output's shape unknown, and the lowering rule says why.

def _static_shape(ctx, i: int) -> Optional[List[int]]:
    """Input i's shape when every dim is known, else None."""
    t = ctx.get_input_type(i) if ctx.has_input(i) else None
    if t is None or not t.HasField("tensor_type") or not t.tensor_type.HasField("shape"):
        return None
    dims = t.tensor_type.shape.dim
    return [int(d.dim_value) for d in dims] if all(d.HasField("dim_value") for d in dims) else None


def _set_output(ctx, shape: Optional[Sequence[int]]) -> None:
    """Y: X's element type, `shape` (None: unknown)."""
    x = ctx.get_input_type(0)
    if x is not None and x.HasField("tensor_type"):
        ctx.set_output_type(0, helper.make_tensor_type_proto(x.tensor_type.elem_type,
                                                             None if shape is None else list(shape)))


def _attr_reader(ctx):
    def attr(name: str, default=None):
        a = ctx.get_attribute(name)
        return default if a is None else helper.get_attribute_value(a)
    return attr


def _channels_last(ctx) -> bool:
    return bool(_attr_reader(ctx)("channels_last", 0))


def _infer_to_nchwc(ctx) -> None:
    x = _static_shape(ctx, 0)
    if x is not None and _channels_last(ctx):
        x = nchwc.channels_first(x)
    _set_output(ctx, nchwc.blocked_shape(x) if x is not None and nchwc.can_block(x) else None)


def _infer_from_nchwc(ctx) -> None:
    x = _static_shape(ctx, 0)
    shape = nchwc.plain_shape(x) if x is not None and len(x) == 5 and x[4] == nchwc.BLOCK else None
    _set_output(ctx, nchwc.channels_last(shape) if shape is not None and _channels_last(ctx) else shape)


def nchwc_conv_output_shape(x: Sequence[int], w: Sequence[int], attr) -> tuple:
    """Y's shape [N, M/8, OH, OW, 8] of an NchwcConv (`attr(name, default)` reads its
    attributes); raises ValueError when X, W and the attributes fit no variant."""
    channels_last = bool(attr("channels_last", 0))
    _, m, _, kernel = nchwc.conv_geometry(x, w, int(attr("group", 1)), channels_last)
    if channels_last:
        x = nchwc.channels_first(x)
    window = resolve_window(x[2:4], attr("kernel_shape", kernel), attr)
    if tuple(window["kernel_shape"]) != tuple(kernel):
        raise ValueError(f"kernel_shape {window['kernel_shape']} differs from the weights' window {list(kernel)}")
    dims = nchwc.conv_output_dims(x[2:4], kernel, window["strides"], window["dilations"], window["pads"])
    if min(dims) < 1:
        raise ValueError(f"the window {list(kernel)} leaves an empty output {list(dims)}")
    return (x[0], m // nchwc.BLOCK) + dims + (nchwc.BLOCK,)


def _infer_nchwc_conv(ctx) -> None:
    x, w = _static_shape(ctx, 0), _static_shape(ctx, 1)
    try:
        shape = None if x is None or w is None else nchwc_conv_output_shape(x, w, _attr_reader(ctx))
    except ValueError:
        shape = None
    _set_output(ctx, shape)


def _infer_nchwc_winograd_conv(ctx) -> None:
    x, u = _static_shape(ctx, 0), _static_shape(ctx, 1)
    pads = ctx.get_attribute("pads")
    try:
        shape = None if x is None or u is None or pads is None else winograd.output_shape(x, u, list(pads.ints))
    except ValueError:
        shape = None
    _set_output(ctx, shape)


def _infer_nchwc_inverted_residual(ctx) -> None:
    shapes = [_static_shape(ctx, i) for i in (0, 1, 3)]
    project = ctx.get_num_inputs() > 5
    wp = _static_shape(ctx, 5) if project else None
    read = _attr_reader(ctx)
    try:
        shape = None if None in shapes or (project and wp is None) else inverted_residual.output_shape(
            *shapes, wp, read("strides", [1, 1]), read("pads", [0, 0, 0, 0]), bool(read("residual", 0)))
    except ValueError:
        shape = None
    _set_output(ctx, shape)


def channels_last_depthwise_output_shape(x: Sequence[int], w: Sequence[int], attr) -> tuple:
    """Y's shape [N, OH, OW, C] of a ChannelsLastDepthwiseConv (`attr(name, default)` reads its
    attributes); raises ValueError when X, W and the attributes do not fit."""
    if len(x) != 4 or x[3] % nchwc.BLOCK != 0 or len(w) != 4 or w[0] * nchwc.BLOCK != x[3] or w[3] != nchwc.BLOCK:
        raise ValueError(f"X {list(x)} and W {list(w)} must be [N, H, W, C] (C % {nchwc.BLOCK} == 0) and "
                         f"[C/{nchwc.BLOCK}, KH, KW, {nchwc.BLOCK}]")
    kernel = list(w[1:3])
    window = resolve_window(x[1:3], attr("kernel_shape", kernel), attr)
    if list(window["kernel_shape"]) != kernel:
        raise ValueError(f"kernel_shape {window['kernel_shape']} differs from the weights' window {kernel}")
    dims = nchwc.conv_output_dims(x[1:3], kernel, window["strides"], window["dilations"], window["pads"])
    if min(dims) < 1:
        raise ValueError(f"the window {kernel} leaves an empty output {list(dims)}")
    return (x[0],) + tuple(dims) + (x[3],)


def _infer_channels_last_depthwise(ctx) -> None:
    x, w = _static_shape(ctx, 0), _static_shape(ctx, 1)
    try:
        shape = None if x is None or w is None else channels_last_depthwise_output_shape(x, w, _attr_reader(ctx))
    except ValueError:
        shape = None
    _set_output(ctx, shape)


_POOL_ATTRS = ("kernel_shape", "strides", "dilations", "pads", "ceil_mode")


def nchwc_pool_output_shape(x: Sequence[int], attrs: Sequence[onnx.AttributeProto]) -> Optional[tuple]:
    """Y's shape of an NchwcMaxPool or NchwcAveragePool on a blocked X: ONNX's MaxPool output
    (the same formula as AveragePool's) on the plain view, blocked (None when MaxPool's inference
    refuses the attributes)."""
    plain = helper.make_tensor_type_proto(onnx.TensorProto.FLOAT, list(nchwc.plain_shape(x)))
    try:
        out = _base_output_type("MaxPool", ["in0"], {"in0": plain.SerializeToString()},
                                [a for a in attrs if a.name in _POOL_ATTRS])
    except Exception:  # onnx's InferenceError (C++): attributes that do not fit X
        return None
    dims = [] if out is None else out.tensor_type.shape.dim
    if len(dims) != 4 or not all(d.HasField("dim_value") for d in dims):
        return None
    return nchwc.blocked_shape([int(d.dim_value) for d in dims])


def _infer_nchwc_pool(ctx) -> None:
    x = _static_shape(ctx, 0)
    if x is None or len(x) != 5 or x[4] != nchwc.BLOCK:
        _set_output(ctx, None)
        return
    attrs = [a for a in (ctx.get_attribute(n) for n in _POOL_ATTRS) if a is not None]
    _set_output(ctx, nchwc_pool_output_shape(x, attrs))


_FLOATS = ["tensor(float)", "tensor(float16)"]


def _nchwc_schema(name: str, doc: str, inputs, attrs, infer) -> defs.OpSchema:
    """inputs: (name, description, optional[, type parameter: "T" (Y's, the default) or "TW" (any
    float type, independently)]); attrs: (name, AttrType, description), all optional."""
    fp = defs.OpSchema.FormalParameter
    option = defs.OpSchema.FormalParameterOption
    typed = [(n, d, opt, rest[0] if rest else "T") for n, d, opt, *rest in inputs]
    constraints = [("T", _FLOATS, "float32 or float16")]
    if any(t == "TW" for *_, t in typed):
        constraints.append(("TW", _FLOATS, "float32 or float16, whatever T is"))
    schema = defs.OpSchema(
        name, DOMAIN, VERSION, f"{doc} (tf-popef internal op, NCHW8c layout)",
        inputs=[fp(n, t, d, param_option=option.Optional if opt else option.Single) for n, d, opt, t in typed],
        outputs=[fp("Y", "T", "")], type_constraints=constraints,
        attributes=[defs.OpSchema.Attribute(n, t, d, required=False) for n, t, d in attrs])
    schema.set_type_and_shape_inference_function(infer)
    return schema


def _nchwc_schemas() -> List[defs.OpSchema]:
    ints, string, floats = defs.OpSchema.AttrType.INTS, defs.OpSchema.AttrType.STRING, defs.OpSchema.AttrType.FLOATS
    window = [("kernel_shape", ints, "[KH, KW]"), ("strides", ints, "[sh, sw]"), ("dilations", ints, "[dh, dw]"),
              ("pads", ints, "[top, left, bottom, right]")]
    x = ("X", "", False)
    channels_last = ("channels_last", defs.OpSchema.AttrType.INT, "1: the plain side is [N, H, W, C]")
    return [
        _nchwc_schema("ToNchwc", "[N, C, H, W] -> [N, C/8, H, W, 8]", [x], [channels_last], _infer_to_nchwc),
        _nchwc_schema("FromNchwc", "[N, Cb, H, W, 8] -> [N, Cb*8, H, W]", [x], [channels_last], _infer_from_nchwc),
        _nchwc_schema("NchwcConv", "act(conv(X, W) + B + Sum), blocked output",
                      [x, ("W", "blocked weights", False), ("B", "[M]", True), ("Sum", "Y's shape", True),
                       ("S", "[N, C/8, 1, 1, 8]: X's scale per image and channel", True)],
                      window + [("group", defs.OpSchema.AttrType.INT, "1, or C (depthwise)"),
                                ("channels_last", defs.OpSchema.AttrType.INT, "1: X is [N, H, W, C], C = 1 or 3"),
                                ("activation", string, "epilogue activation"),
                                ("activation_params", floats, "its parameters")], _infer_nchwc_conv),
        _nchwc_schema("NchwcWinogradConv", "act(conv3x3(X, W) + B + Sum) by Winograd F(m x m, 3x3), blocked output",
                      [x, ("U", "transformed weights (float32 in a float16 model)", False, "TW"), ("B", "[M]", True),
                       ("Sum", "Y's shape", True)],
                      [("pads", ints, "[top, left, bottom, right]"), ("activation", string, "epilogue activation"),
                       ("activation_params", floats, "its parameters")], _infer_nchwc_winograd_conv),
        _nchwc_schema("NchwcInvertedResidual",
                      "expand 1x1 -> depthwise [-> project 1x1 [+ X]] in one step (no Wp, Bp: Y is the depthwise's)",
                      [x] + [(name, desc, optional) for name, desc, optional in (
                          ("We", "expand weights", False), ("Be", "[Cexp]", False),
                          ("Wd", "depthwise weights", False), ("Bd", "[Cexp]", False),
                          ("Wp", "project weights", True), ("Bp", "[Cout]", True))],
                      window + [("residual", defs.OpSchema.AttrType.INT, "1: Y adds X")] +
                      [(f"{stage}_{suffix}", kind, f"the {stage} stage's {what}")
                       for stage in inverted_residual.STAGES
                       for suffix, kind, what in (("activation", string, "activation"),
                                                  ("activation_params", floats, "activation parameters"))],
                      _infer_nchwc_inverted_residual),
        _nchwc_schema("ChannelsLastDepthwiseConv",
                      "depthwise conv(X, W) + B on channels-last X [N, H, W, C], then optionally "
                      "LayerNormalization over C",
                      [x, ("W", "blocked depthwise weights [C/8, KH, KW, 8]", False), ("B", "[C]", True),
                       ("Scale", "[C]: LayerNormalization's scale", True),
                       ("LnBias", "[C]: LayerNormalization's bias", True)],
                      window + [("layer_norm", defs.OpSchema.AttrType.INT, "1: normalize over C"),
                                ("epsilon", defs.OpSchema.AttrType.FLOAT, "LayerNormalization's epsilon")],
                      _infer_channels_last_depthwise),
        _nchwc_schema("NchwcMaxPool", "MaxPool on a blocked tensor", [x],
                      window + [("ceil_mode", defs.OpSchema.AttrType.INT, "only for Y's shape"),
                                ("zero_pads", defs.OpSchema.AttrType.INT, "1: the pads are zeros (a folded Pad)")],
                      _infer_nchwc_pool),
        _nchwc_schema("NchwcAveragePool", "AveragePool on a blocked tensor", [x],
                      window + [("ceil_mode", defs.OpSchema.AttrType.INT, "only for Y's shape"),
                                ("count_include_pad", defs.OpSchema.AttrType.INT, "as AveragePool")],
                      _infer_nchwc_pool),
    ]


def _attention_schema() -> defs.OpSchema:
    fp = defs.OpSchema.FormalParameter
    attr = defs.OpSchema.Attribute
    schema = defs.OpSchema(
        "FusedAttention", DOMAIN, VERSION, "per-head softmax(scale·Q·Kᵀ)·V on [B, S, H·d] (tf-popef internal op)",
        inputs=[fp("Q", "T", "[B, Sq, H·d], or QKV [B, S, wq + wk + wv] with qkv_widths"),
                fp("K", "T", "[B, Sk, H·d] (absent with qkv_widths)",
                   param_option=defs.OpSchema.FormalParameterOption.Optional),
                fp("V", "T", "[B, Sk, H·dv] (absent with qkv_widths)",
                   param_option=defs.OpSchema.FormalParameterOption.Optional)],
        outputs=[fp("Y", "T", "[B, Sq, H·dv]")],
        type_constraints=[("T", ["tensor(float)", "tensor(float16)"], "float types")],
        attributes=[attr("num_heads", defs.OpSchema.AttrType.INT, "H", required=True),
                    attr("scale", defs.OpSchema.AttrType.FLOAT, "applied to the scores (default 1)", required=False),
                    attr("qkv_widths", defs.OpSchema.AttrType.INTS,
                         "[wq, wk, wv]: one input whose column ranges are Q, K, V", required=False)])

    def infer(ctx) -> None:
        widths = ctx.get_attribute("qkv_widths")
        q = ctx.get_input_type(0)
        if q is None or len(q.tensor_type.shape.dim) != 3:
            return
        out = onnx.TypeProto()
        out.CopyFrom(q)
        if widths is not None:
            if len(widths.ints) != 3:
                return
            out.tensor_type.shape.dim[2].Clear()
            out.tensor_type.shape.dim[2].dim_value = int(widths.ints[2])
        else:
            v = ctx.get_input_type(2) if ctx.get_num_inputs() > 2 else None
            if v is None or len(v.tensor_type.shape.dim) != 3:
                return
            out.tensor_type.shape.dim[2].CopyFrom(v.tensor_type.shape.dim[2])
        ctx.set_output_type(0, out)

    schema.set_type_and_shape_inference_function(infer)
    return schema


NCHWC_OPS = ("ToNchwc", "FromNchwc", "NchwcConv", "NchwcWinogradConv", "NchwcInvertedResidual", "NchwcMaxPool",
             "NchwcAveragePool")


def _register_all() -> None:
    for name, (base_op, base_inputs) in FUSED_OPS.items():
        if defs.has(name, VERSION, DOMAIN):
            continue
        defs.register_schema(_make_schema(name, base_op, base_inputs))
    if not defs.has("FusedElementwise", VERSION, DOMAIN):
        defs.register_schema(_elementwise_schema())
    for schema in _nchwc_schemas() + [_attention_schema()]:
        if not defs.has(schema.name, VERSION, DOMAIN):
            defs.register_schema(schema)


def ensure_domain_imported(model: onnx.ModelProto) -> None:
    """A model holding internal ops must import their domain (onnx.checker requires it)."""
    if not any(imp.domain == DOMAIN for imp in model.opset_import):
        model.opset_import.append(helper.make_opsetid(DOMAIN, VERSION))


def fused_node(fused_op: str, inputs: Sequence[str], output: str, name: str, base: onnx.NodeProto,
               activation: str = "", activation_params: Sequence[float] = ()) -> onnx.NodeProto:
    """A fused node with `base`'s attributes plus the epilogue's; trailing empty inputs dropped."""
    if activation not in ACTIVATIONS or len(activation_params) != len(ACTIVATIONS[activation].params):
        raise ValueError(f"activation '{activation}' with params {list(activation_params)}")
    inputs = list(inputs)
    while inputs and inputs[-1] == "":
        inputs.pop()
    node = helper.make_node(fused_op, inputs, [output], name=name, domain=DOMAIN)
    node.attribute.extend(a for a in base.attribute if a.name not in _EPILOGUE_ATTRS)
    if activation:
        node.attribute.append(helper.make_attribute("activation", activation))
        if activation_params:
            node.attribute.append(helper.make_attribute("activation_params", [float(p) for p in activation_params]))
    return node


_register_all()
