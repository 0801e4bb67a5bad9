"""FLOPs of a static-shape ONNX model, the convention of bench_models.py's GFLOP/s column:
2 x the multiply-accumulates of Conv, ConvTranspose, MatMul, Gemm and Einsum (the product of
every index's size), everything else (activations, normalisation, softmax, pooling,
elementwise) counted as zero. bench_models.py counts on the standard fp32 graph with the batch
fixed (model_suite.standard_onnx)."""
from typing import Dict, Iterator, Tuple

import numpy as np
import onnx
from onnx import shape_inference


def _shapes(model: onnx.ModelProto) -> Dict[str, tuple]:
    inferred = shape_inference.infer_shapes(model, strict_mode=False)
    graph = inferred.graph
    shapes = {}
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        dims = vi.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            shapes[vi.name] = tuple(d.dim_value for d in dims)
    for t in graph.initializer:
        shapes[t.name] = tuple(t.dims)
    return shapes


def _attr(node, name, default):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _macs(node, shapes) -> int:
    def shape(i):
        name = node.input[i] if i < len(node.input) else ""
        if name not in shapes:
            raise ValueError(f"flop_count: no static shape for input {i} ('{name}') of {node.op_type} node '{node.name}'")
        return shapes[name]

    out = shapes.get(node.output[0])
    if out is None:
        raise ValueError(f"flop_count: no static shape for output '{node.output[0]}' of {node.op_type} node '{node.name}'")
    if node.op_type == "Conv":
        w = shape(1)  # [C_out, C_in/group, k...]
        return int(np.prod(out)) * int(np.prod(w[1:]))
    if node.op_type == "ConvTranspose":
        x, w = shape(0), shape(1)  # w: [C_in, C_out/group, k...]; every input element meets C_out/group x k taps
        return int(np.prod(x)) * int(np.prod(w[1:]))
    if node.op_type == "MatMul":
        a = shape(0)
        return int(np.prod(out)) * int(a[-1])
    if node.op_type == "Gemm":
        a = shape(0)
        k = a[0] if _attr(node, "transA", 0) else a[1]
        return int(np.prod(out)) * int(k)
    if node.op_type == "Einsum":
        terms = _attr(node, "equation", b"").decode().replace(" ", "").split("->")[0].split(",")
        sizes = {}
        for i, term in enumerate(terms):
            if "." in term:
                raise ValueError(f"flop_count: Einsum node '{node.name}' uses an ellipsis ({term}); not counted")
            sizes.update(zip(term, shape(i)))
        return int(np.prod(list(sizes.values())))
    return 0


def node_flops(model: onnx.ModelProto) -> Iterator[Tuple[onnx.NodeProto, int]]:
    """(node, 2 x its MACs) for each Conv/ConvTranspose/MatMul/Gemm/Einsum node of `model`
    (static shapes): count_flops' terms, for callers that sum them by their own grouping."""
    shapes = _shapes(model)
    for n in model.graph.node:
        if n.op_type in ("Conv", "ConvTranspose", "MatMul", "Gemm", "Einsum"):
            yield n, 2 * _macs(n, shapes)


def count_flops(model: onnx.ModelProto) -> int:
    """2 x MACs of the Conv/ConvTranspose/MatMul/Gemm/Einsum nodes of `model` (static shapes)."""
    return sum(flops for _, flops in node_flops(model))
