"""The compiler's internal ONNX ops (domain `ai.tfpopef`), written by the fusion passes and
lowered to the runtime kernels of the same name (docs/popef.md, "Internal ops"):

  FusedConv(X, W, [B], [Sum])    Conv's attributes
  FusedGemm(A, B, [C], [Sum])    Gemm's attributes
  FusedMatMul(A, B, [Bias], [Sum])

Y = activation(op(...) + Sum), `activation` one of ACTIVATIONS with `activation_params`; the
optional inputs are present as named inputs or "" (ONNX's convention for a missing optional).

  FusedElementwise(X0, X1, ...)  attribute `program`: a chain of elementwise ops run as one loop
                                 (text form: fuse_elementwise_chain.py, the runtime's
                                 elementwise_program.h); X0 has the output's shape and type, the
                                 others that shape, [N] (the last dim) or one element.

The ops are registered with ONNX's schema registry (importing this module does it once per
process) with a type-and-shape inference function that runs the base op's own inference, so
onnx.checker and shape inference handle a fused model like any other."""
from typing import Dict, Sequence

import onnx
from onnx import defs, helper

DOMAIN = "ai.tfpopef"
VERSION = 1

# Activation name -> its activation_params, in order (the runtime's epilogue.h reads the same).
ACTIVATIONS: Dict[str, Sequence[str]] = {
    "": (), "Relu": (), "Clip": ("min", "max"), "LeakyRelu": ("alpha",), "Sigmoid": (), "Swish": ("alpha",),
    "HardSigmoid": ("alpha", "beta"), "HardSwish": (), "GeluErf": (), "GeluTanh": (), "Tanh": (),
}

# Fused op -> (the base ONNX op whose attributes and output type it has, the base op's input count).
FUSED_OPS: Dict[str, tuple] = {"FusedConv": ("Conv", 3), "FusedGemm": ("Gemm", 3), "FusedMatMul": ("MatMul", 2)}
_EPILOGUE_ATTRS = ("activation", "activation_params")
_BASE_OPSET = 17  # the base ops' inference, as of this opset (their semantics have not changed since)


def _infer(base_op: str, base_inputs: int):
    schema = defs.get_schema(base_op, _BASE_OPSET)

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
        node = helper.make_node(base_op, names, ["out"])
        for name in _BASE_ATTRS[base_op]:
            attr = ctx.get_attribute(name)
            if attr is not None:
                node.attribute.append(attr)
        out = schema._infer_node_outputs(node.SerializeToString(), types, opsetImports={"": _BASE_OPSET})
        if "out" in out:
            ctx.set_output_type(0, onnx.TypeProto.FromString(out["out"]))

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


def _register_all() -> None:
    for name, (base_op, base_inputs) in FUSED_OPS.items():
        if defs.has(name, VERSION, DOMAIN):
            continue
        defs.register_schema(_make_schema(name, base_op, base_inputs))
    if not defs.has("FusedElementwise", VERSION, DOMAIN):
        defs.register_schema(_elementwise_schema())


def ensure_domain_imported(model: onnx.ModelProto) -> None:
    """A model holding internal ops must import their domain (onnx.checker requires it)."""
    if not any(imp.domain == DOMAIN for imp in model.opset_import):
        model.opset_import.append(helper.make_opsetid(DOMAIN, VERSION))


def fused_node(fused_op: str, inputs: Sequence[str], output: str, name: str, base: onnx.NodeProto,
               activation: str = "", activation_params: Sequence[float] = ()) -> onnx.NodeProto:
    """A fused node with `base`'s attributes plus the epilogue's; trailing empty inputs dropped."""
    if activation not in ACTIVATIONS or len(activation_params) != len(ACTIVATIONS[activation]):
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
