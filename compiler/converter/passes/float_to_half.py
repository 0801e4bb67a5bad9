import numpy as np
from onnx import TensorProto, numpy_helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph.graph_edit import subgraphs

FP16_MAX = float(np.finfo(np.float16).max)
# Inputs ONNX requires to stay float32 whatever the data type: (op type, input index).
_KEEP_FLOAT32_INPUTS = {("Resize", 2), ("Upsample", 1)}


@register("float_to_half", kind="precision")
def float_to_half(model, ctx):
    """With --precision fp16: float32 initializers, anchors, Casts and value_info become float16."""
    if ctx.precision != "fp16":
        return model
    _convert_graph(model.graph, ctx)
    return model


def _to_half(array: np.ndarray, name: str, ctx) -> np.ndarray:
    # Values beyond float16's range would become inf; saturating keeps the model usable.
    finite = np.isfinite(array)
    too_big = finite & (np.abs(array) > FP16_MAX)
    if too_big.any():
        ctx.logger.warning("float_to_half: %d value(s) of %s exceed float16's range and are clamped to "
                           "+-%g", int(too_big.sum()), name, FP16_MAX)
        array = np.where(too_big, np.clip(array, -FP16_MAX, FP16_MAX), array)
    return array.astype(np.float16)


def _convert_tensor(tensor: TensorProto, ctx) -> None:
    if tensor.data_type != TensorProto.FLOAT:
        return
    half = numpy_helper.from_array(_to_half(numpy_helper.to_array(tensor), tensor.name, ctx), tensor.name)
    tensor.CopyFrom(half)


def _convert_value_infos(value_infos) -> None:
    for vi in value_infos:
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT16


def _convert_graph(graph, ctx) -> None:
    keep_fp32 = {}
    for node in graph.node:
        for i, name in enumerate(node.input):
            keeps = (node.op_type, i) in _KEEP_FLOAT32_INPUTS
            keep_fp32[name] = keep_fp32.get(name, True) and keeps
    for tensor in list(graph.initializer):
        if tensor.data_type != TensorProto.FLOAT or keep_fp32.get(tensor.name, False):
            continue
        if any((n.op_type, i) in _KEEP_FLOAT32_INPUTS for n in graph.node for i, x in enumerate(n.input)
               if x == tensor.name):
            _split_mixed_use(graph, tensor, ctx)
        else:
            _convert_tensor(tensor, ctx)
    for node in graph.node:
        if node.op_type == "Cast":
            for attr in node.attribute:
                if attr.name == "to" and attr.i == TensorProto.FLOAT:
                    attr.i = TensorProto.FLOAT16
        for attr in node.attribute:
            if attr.name == "value" and attr.type == attr.TENSOR:  # Constant, ConstantOfShape
                _convert_tensor(attr.t, ctx)
        for g in subgraphs(node):
            _convert_graph(g, ctx)
    _convert_value_infos(graph.value_info)
    _convert_value_infos(graph.input)
    _convert_value_infos(graph.output)


def _split_mixed_use(graph, tensor, ctx) -> None:
    """A float32 constant read both by a keep-float32 input and by ordinary inputs: the
    ordinary readers get a float16 copy."""
    copy = TensorProto()
    copy.CopyFrom(tensor)
    copy.name = f"{tensor.name}_fp16"
    _convert_tensor(copy, ctx)
    graph.initializer.append(copy)
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name == tensor.name and (node.op_type, i) not in _KEEP_FLOAT32_INPUTS:
                node.input[i] = copy.name
