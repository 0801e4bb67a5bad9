"""Checks every node of a model (and of its subgraphs): its names are text (ONNX is proto2, so
protobuf hands invalid UTF-8 strings over as bytes), and it matches its ONNX operator schema for
the opset the model imports: input and output counts, required inputs and outputs named, required
attributes present, attribute types.
The converter passes and the lowering rely on them, so a node breaking its schema is refused
at load time, naming the node, rather than failing deep in a pass. Ops without a schema
(custom domains, unknown ops) are left to the converter, which reports unsupported ops."""
from typing import Dict

import onnx
from google.protobuf.descriptor import FieldDescriptor
from onnx import AttributeProto, defs

from compiler.errors import ModelLoadError
from compiler.frontends.tensor_data_checks import graphs


def _check_text(message, model_name: str) -> None:
    """Every string field of `message` and its submessages holds text."""
    for field, value in message.ListFields():
        values = value if field.is_repeated else [value]
        if field.type == FieldDescriptor.TYPE_STRING:
            for v in values:
                if not isinstance(v, str):
                    raise ModelLoadError(f"{model_name}: not a valid ONNX model: {field.containing_type.name}."
                                         f"{field.name} {v[:40]!r} is not UTF-8 text")
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            for v in values:
                _check_text(v, model_name)


def _check_node(node: onnx.NodeProto, opsets: Dict[str, int], model_name: str) -> None:
    domain = "" if node.domain in ("", "ai.onnx") else node.domain
    version = opsets.get(domain, opsets.get("ai.onnx"))
    if version is None or not defs.has(node.op_type, domain):
        return
    where = f"{model_name}: node '{node.name or node.op_type}' ({node.op_type}, opset {version})"
    try:
        schema = defs.get_schema(node.op_type, version, domain)
    except defs.SchemaError:
        since = min(s.since_version for s in defs.get_all_schemas_with_history()
                    if s.name == node.op_type and s.domain == domain)
        raise ModelLoadError(f"{where}: the operator does not exist in opset {version} (it was added in opset "
                             f"{since}); import opset {since} or later") from None
    if not schema.min_input <= len(node.input) <= schema.max_input:
        raise ModelLoadError(f"{where} has {len(node.input)} inputs; the operator takes {schema.min_input} to "
                             f"{schema.max_input}")
    if not schema.min_output <= len(node.output) <= schema.max_output:
        raise ModelLoadError(f"{where} has {len(node.output)} outputs; the operator gives {schema.min_output} to "
                             f"{schema.max_output}")
    for kind, names, formals in (("input", node.input, schema.inputs), ("output", node.output, schema.outputs)):
        for index, (name, formal) in enumerate(zip(names, formals)):
            # An empty name stands for an omitted optional input or output only.
            if not name and formal.option == defs.OpSchema.FormalParameterOption.Single:
                raise ModelLoadError(f"{where}: {kind} {index} ('{formal.name}') is required but its name is empty")
    given = {a.name: a for a in node.attribute}
    for name, spec in schema.attributes.items():
        if spec.required and name not in given:
            raise ModelLoadError(f"{where} lacks its required attribute '{name}'")
        if name in given and given[name].type != int(spec.type.value):
            raise ModelLoadError(f"{where}: attribute '{name}' is "
                                 f"{AttributeProto.AttributeType.Name(given[name].type)}, the operator expects "
                                 f"{AttributeProto.AttributeType.Name(int(spec.type.value))}")


def check_node_schemas(model: onnx.ModelProto, model_name: str) -> None:
    opsets = {o.domain: o.version for o in model.opset_import}
    _check_text(model, model_name)
    for graph in graphs(model.graph):
        for node in graph.node:
            _check_node(node, opsets, model_name)
