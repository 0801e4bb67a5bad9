"""Checks of the tensors a model carries (initializers, Constant values, in every subgraph) at
load time: a known data type, non-negative dims, and data whose length matches the dims. Every
later stage converts them with numpy_helper.to_array, so a mismatch is reported here, once, as a
ModelLoadError naming the tensor, instead of a numpy error deep in a pass."""
from typing import Iterator

import onnx
from onnx import AttributeProto, TensorProto, numpy_helper

from compiler.errors import ModelLoadError


def graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == AttributeProto.GRAPH:
                yield from graphs(attr.g)
            elif attr.type == AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from graphs(g)


def _tensors(model: onnx.ModelProto) -> Iterator[tuple]:
    for graph in graphs(model.graph):
        for t in graph.initializer:
            yield "initializer", t
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == AttributeProto.TENSOR:
                    yield f"node '{node.name or node.op_type}' attribute '{attr.name}'", attr.t
                elif attr.type == AttributeProto.TENSORS:
                    for t in attr.tensors:
                        yield f"node '{node.name or node.op_type}' attribute '{attr.name}'", t


def check_tensor_data(model: onnx.ModelProto, model_name: str) -> None:
    for kind, t in _tensors(model):
        what = f"{model_name}: {kind} '{t.name}'"
        if t.data_location == TensorProto.EXTERNAL:
            continue  # reported by load_model: external data that was not loaded
        if t.data_type == TensorProto.UNDEFINED or t.data_type not in TensorProto.DataType.values():
            raise ModelLoadError(f"{what} has an unknown data type ({t.data_type})")
        if any(d < 0 for d in t.dims):
            raise ModelLoadError(f"{what} has negative dims {list(t.dims)}")
        try:
            numpy_helper.to_array(t)
        except Exception as e:  # onnx/numpy raise ValueError, TypeError or KeyError for malformed data
            raise ModelLoadError(f"{what} ({TensorProto.DataType.Name(t.data_type)} {list(t.dims)}) has data that "
                                 f"does not match its type and dims: {e}") from None
