"""A control-flow body (If branch, Loop body) as a model of its own, and the static output types
of the If/Loop nodes kept for run time.

ONNX shape inference types the outputs of a Loop poorly (scan outputs get an unknown length,
carried values often an unknown rank) and gives an If whose branches disagree a merged, non-
static shape. The compiler runs such nodes as sub-programs with static shapes, so it types them
itself: each body becomes a standalone model whose inputs are the body's formal inputs (typed
from the values the node binds to them) plus the outer tensors it reads (outer constants become
initializers so that the body folds), and ONNX inference on that model gives the body's output
types.
"""
from typing import Callable, Dict, List, Optional

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from compiler.onnx_graph.graph_edit import outer_references, subgraphs
from compiler.onnx_graph.tensor_types import TensorType, write_type


def body_model(body: onnx.GraphProto, input_types: List[TensorType], outer_types: Dict[str, TensorType],
               outer_constants: Dict[str, np.ndarray], opset_import, ir_version: int) -> onnx.ModelProto:
    """`input_types`: one per formal input of `body`. Outer tensors the body reads become graph
    inputs typed from `outer_types`, or initializers when `outer_constants` has their value."""
    graph = onnx.GraphProto()
    graph.CopyFrom(body)
    del graph.input[:]
    for formal, t in zip(body.input, input_types):
        vi = graph.input.add()
        vi.name = formal.name
        write_type(vi, t)
    local = {i.name for i in graph.initializer}
    for name in sorted(outer_references(body)):
        if name in local:
            continue
        if name in outer_constants:
            graph.initializer.append(numpy_helper.from_array(np.asarray(outer_constants[name]), name))
        else:
            vi = graph.input.add()
            vi.name = name
            t = outer_types.get(name)
            if t is not None:
                write_type(vi, t)
            else:
                vi.type.tensor_type.elem_type = TensorProto.UNDEFINED
    input_types = {vi.name: vi.type for vi in graph.input}
    for out in graph.output:  # declared output types may be stale (e.g. before --input_shape)
        if out.name in input_types:  # a pass-through: onnx would take the output's type for the input's
            out.type.CopyFrom(input_types[out.name])
        else:
            out.type.tensor_type.ClearField("shape")
    model = helper.make_model(graph, opset_imports=list(opset_import))
    model.ir_version = ir_version
    return model


def rename_locals(graph: onnx.GraphProto, prefix: str) -> Dict[str, str]:
    """Renames every tensor `graph` defines (inputs, initializers, node outputs) to
    `prefix + name`, in place, including the references nested subgraphs make to them; outer
    names are kept. Returns the mapping."""
    mapping: Dict[str, str] = {}
    for vi in graph.input:
        mapping[vi.name] = prefix + vi.name
    for init in graph.initializer:
        mapping[init.name] = prefix + init.name
    for node in graph.node:
        for out in node.output:
            if out:
                mapping[out] = prefix + out
    for vi in graph.input:
        vi.name = mapping[vi.name]
    for init in graph.initializer:
        init.name = mapping[init.name]
    for node in graph.node:
        for k, name in enumerate(node.input):
            if name in mapping:
                node.input[k] = mapping[name]
        for k, name in enumerate(node.output):
            if name in mapping:
                node.output[k] = mapping[name]
        for g in subgraphs(node):
            rename_free_references(g, mapping)
    for out in graph.output:
        if out.name in mapping:
            out.name = mapping[out.name]
    for vi in graph.value_info:
        if vi.name in mapping:
            vi.name = mapping[vi.name]
    return mapping


def rename_free_references(graph: onnx.GraphProto, mapping: Dict[str, str]) -> None:
    """Renames, inside a nested subgraph, the names it reads from the scope being renamed."""
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    for node in graph.node:
        for k, name in enumerate(node.input):
            if name in mapping and name not in defined:
                node.input[k] = mapping[name]
        for g in subgraphs(node):
            rename_free_references(g, {k: v for k, v in mapping.items() if k not in defined})
        defined.update(node.output)
    for out in graph.output:
        if out.name in mapping and out.name not in defined:
            out.name = mapping[out.name]


def scalar_type(elem_type: int) -> TensorType:
    return TensorType(elem_type, ())


# (body model, model_name) -> the types of its tensors: type_inference.infer_types, which calls
# control_flow_output_types in turn for the If/Loop nodes a body holds.
InferBodyTypes = Callable[[onnx.ModelProto, str], Dict[str, TensorType]]


def body_output_types(model: onnx.ModelProto, model_name: str, infer: InferBodyTypes) -> List[Optional[TensorType]]:
    types = infer(model, model_name)
    return [types.get(o.name) for o in model.graph.output]


def control_flow_output_types(model: onnx.ModelProto, types: Dict[str, TensorType], model_name: str,
                              infer: InferBodyTypes) -> Dict[str, TensorType]:
    """Static types of the outputs of the top-level If and Loop nodes whose bodies type
    statically (each body typed by `infer`); nothing for the others (the strict checks then name
    them)."""
    graph = model.graph
    constants = {t.name: numpy_helper.to_array(t) for t in graph.initializer
                 if int(np.prod(t.dims, dtype=np.int64)) <= 16}
    for node in graph.node:
        if node.op_type == "Constant" and node.output and node.attribute and node.attribute[0].name == "value":
            constants[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    found: Dict[str, TensorType] = {}
    for node in graph.node:
        if node.domain not in ("", "ai.onnx") or node.op_type not in ("If", "Loop"):
            continue
        try:
            if node.op_type == "If":
                found.update(_if_types(model, node, types, constants, model_name, infer))
            else:
                found.update(_loop_types(model, node, types, constants, model_name, infer))
        except Exception:  # noqa: BLE001 - typing is best effort; the strict passes report the node
            continue
    return found


def _if_types(model, node, types, constants, model_name, infer) -> Dict[str, TensorType]:
    attrs = {a.name: a.g for a in node.attribute}
    branch_types = []
    for key in ("then_branch", "else_branch"):
        sub = body_model(attrs[key], [], types, constants, model.opset_import, model.ir_version)
        branch_types.append(body_output_types(sub, model_name, infer))
    found = {}
    for out, a, b in zip(node.output, *branch_types):
        if out and a is not None and a.is_static and a == b:
            found[out] = a
    return found


def _loop_types(model, node, types, constants, model_name, infer) -> Dict[str, TensorType]:
    body = next(a.g for a in node.attribute if a.name == "body")
    carried = list(node.input[2:])
    carried_types = [types.get(n) for n in carried]
    if any(t is None or not t.is_static for t in carried_types):
        return {}
    sub = body_model(body, [scalar_type(TensorProto.INT64), scalar_type(TensorProto.BOOL)] + carried_types, types,
                     constants, model.opset_import, model.ir_version)
    out_types = body_output_types(sub, model_name, infer)
    found = {}
    for out, t in zip(node.output[:len(carried)], out_types[1:1 + len(carried)]):
        if out and t is not None and t.is_static:
            found[out] = t
    trips = constants.get(node.input[0]) if node.input and node.input[0] else None
    if trips is not None:
        length = int(np.asarray(trips).reshape(-1)[0])
        for out, t in zip(node.output[len(carried):], out_types[1 + len(carried):]):
            if out and t is not None and t.is_static:
                found[out] = TensorType(t.elem_type, (length,) + tuple(t.shape))
    return found
