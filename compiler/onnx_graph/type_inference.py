"""Static tensor types of every tensor of a model, from ONNX shape inference run on a light copy
of the model (big initializers replaced by typed inputs, so inference never copies the weights
and never hits protobuf's 2 GB limit). If/Loop nodes kept for run time are typed from their
bodies (onnx_graph/subgraph_model.py)."""
import dataclasses
from typing import Dict, List, Optional

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from compiler.errors import ConversionError
from compiler.onnx_graph import internal_ops  # noqa: F401  (registers the ai.tfpopef schemas with ONNX)
from compiler.onnx_graph import subgraph_model
from compiler.onnx_graph.graph_edit import subgraphs
from compiler.onnx_graph.rank_operands import check_rank_operands
from compiler.onnx_graph.tensor_types import TensorType, type_of_initializer, type_of_value_info, write_type

# Initializers up to this many elements stay in the inference copy: data propagation needs the
# values of small shape constants (Reshape targets, Slice bounds...), never of weights.
_KEEP_INITIALIZER_ELEMENTS = 4096
# onnx's data propagation stands for every 1-D tensor of static length N that a propagating op
# (Gather, Concat, Add...) reads by a TensorShapeProto of N dims, about 70 bytes each: a declared
# [2^31] input took 13 GB. Shape values have a handful of elements, so when the model's 1-D
# tensors hold more than this in total, its types are inferred without data propagation.
_MAX_PROPAGATED_ELEMENTS = 1 << 22


def _light_copy(model: onnx.ModelProto) -> onnx.ModelProto:
    light = onnx.ModelProto()
    light.ir_version = model.ir_version
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    src, dst = model.graph, light.graph
    dst.name = src.name
    dst.node.extend(src.node)
    dst.input.extend(src.input)
    dst.sparse_initializer.extend(src.sparse_initializer)
    listed = {i.name for i in src.input}
    for init in src.initializer:
        external = init.data_location == TensorProto.EXTERNAL
        if not external and int(np.prod(init.dims, dtype=np.int64)) <= _KEEP_INITIALIZER_ELEMENTS:
            dst.initializer.append(init)
        elif init.name not in listed:
            dst.input.append(helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
    for out in src.output:
        # Declared output shapes are dropped: they may predate --input_shape/--batch_size and would
        # then conflict with the shapes inferred from the new inputs.
        copy = dst.output.add()
        copy.name = out.name
        passthrough = next((i for i in src.input if i.name == out.name), None)
        if passthrough is not None:  # an output that is an input (a loop body's unchanged value) has its type
            copy.type.CopyFrom(passthrough.type)
        elif out.type.HasField("tensor_type"):
            copy.type.tensor_type.elem_type = out.type.tensor_type.elem_type
        else:
            copy.type.CopyFrom(out.type)
    return light


@dataclasses.dataclass
class InferredTypes:
    types: Dict[str, TensorType]
    value_info: list    # inferred ValueInfoProto of intermediate tensors

    def get(self, name: str) -> Optional[TensorType]:
        return self.types.get(name)


def infer_types(model: onnx.ModelProto, strict: bool = False, model_name: str = "<model>") -> InferredTypes:
    """Types of all tensors. strict=True turns any inference error or type mismatch into a
    ConversionError naming the node (onnx's message names it). If/Loop nodes kept for run time
    are typed from their bodies (onnx_graph/subgraph_model.py) and inference reruns with those
    types as hints, so the tensors computed from their outputs get static shapes too."""
    result = _infer_types(model, strict, model_name)
    if not any(n.op_type in ("If", "Loop") for n in model.graph.node):
        return result
    hints: Dict[str, TensorType] = {}
    for _ in range(4):  # a Loop fed by another Loop's output is typed one round later
        found = {k: v for k, v in subgraph_model.control_flow_output_types(model, result.types, model_name, _body_types).items()
                 if result.types.get(k) != v}
        if not found:
            break
        hints.update(found)
        result = _infer_types(model, strict, model_name, hints)
    return result


def _body_types(model: onnx.ModelProto, model_name: str) -> Dict[str, TensorType]:
    return infer_types(model, model_name=model_name).types


def _infer_types(model: onnx.ModelProto, strict: bool, model_name: str,
                 hints: Optional[Dict[str, TensorType]] = None) -> InferredTypes:
    check_rank_operands(model.graph, model_name)
    light = _light_copy(model)
    outputs = {o.name for o in light.graph.output}
    for name, t in (hints or {}).items():
        vi = next((o for o in light.graph.output if o.name == name), None) if name in outputs else None
        if vi is None:
            vi = light.graph.value_info.add()
            vi.name = name
        write_type(vi, t)
    inferred = _infer_shapes(light, strict, model_name, data_prop=False)
    if _one_dim_elements(inferred) <= _MAX_PROPAGATED_ELEMENTS:
        inferred = _infer_shapes(light, strict, model_name, data_prop=True)
    types: Dict[str, TensorType] = {}
    for init in model.graph.initializer:
        types[init.name] = type_of_initializer(init)
    for vi in list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output):
        t = type_of_value_info(vi)
        if t is not None and vi.name not in types:
            types[vi.name] = t
    for out in model.graph.output:
        # Keep a declared output type when inference knows nothing better (e.g. a custom op).
        declared = type_of_value_info(out)
        have = types.get(out.name)
        if declared is not None and (have is None or (have.shape is None and declared.shape is not None)):
            types[out.name] = declared
    return InferredTypes(types, list(inferred.graph.value_info))


def infer_node_types(node: onnx.NodeProto, input_types: Dict[str, TensorType], input_values: Dict[str, np.ndarray],
                     opsets: Dict[str, int]) -> Dict[str, TensorType]:
    """ONNX's inference of one node's output types from its input types and the values of its
    constant inputs (name -> value); {} when an input type is unknown or inference cannot say."""
    if subgraphs(node):  # their outputs depend on the body: infer_types handles them
        return {}
    domain = "" if node.domain == "ai.onnx" else node.domain
    if any(name and name not in input_types for name in node.input) or domain not in opsets:
        return {}
    try:
        schema = onnx.defs.get_schema(node.op_type, opsets[domain], domain)
        types = {name: helper.make_tensor_type_proto(t.elem_type, t.shape) for name, t in input_types.items()
                 if name in node.input}
        data = {name: numpy_helper.from_array(v, name) for name, v in input_values.items() if name in node.input}
        inferred = onnx.shape_inference.infer_node_outputs(
            schema, node, types, data, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets.items()])
    except Exception:  # no schema at this opset, or inference rejects the node: nothing learned
        return {}
    result = {}
    for name, type_proto in inferred.items():
        vi = onnx.ValueInfoProto()
        vi.type.CopyFrom(type_proto)
        t = type_of_value_info(vi)
        if t is not None:
            result[name] = t
    return result


def _infer_shapes(light: onnx.ModelProto, strict: bool, model_name: str, data_prop: bool) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(light, check_type=strict, strict_mode=strict, data_prop=data_prop)
    except Exception as e:  # onnx raises InferenceError / ValidationError from C++
        raise ConversionError(f"{model_name}: shape inference failed: {str(e).strip()}") from None


def _one_dim_elements(inferred: onnx.ModelProto) -> int:
    """The elements of all 1-D tensors of static length: what data propagation would track."""
    graph = inferred.graph
    total = 0
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        shape = vi.type.tensor_type.shape if vi.type.HasField("tensor_type") else None
        if shape is not None and len(shape.dim) == 1 and shape.dim[0].HasField("dim_value"):
            total += max(shape.dim[0].dim_value, 0)
    return total


def body_output_types(model: onnx.ModelProto, model_name: str) -> List[Optional[TensorType]]:
    """The inferred types of a body model's outputs (None where unknown)."""
    return subgraph_model.body_output_types(model, model_name, _body_types)
