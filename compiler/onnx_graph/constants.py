"""Compile-time constant tensors of a graph: initializers and outputs of `Constant` nodes,
converted to numpy lazily (weights are only copied when a pass or the lowering needs them)."""
from typing import Dict

import numpy as np
import onnx
from onnx import numpy_helper

from compiler.errors import ModelLoadError


def is_constant_node(node: onnx.NodeProto) -> bool:
    return node.op_type == "Constant" and node.domain in ("", "ai.onnx")


def constant_node_value(node: onnx.NodeProto, opset: int) -> np.ndarray:
    for attr in node.attribute:
        if attr.name == "value":
            return numpy_helper.to_array(attr.t)
    # value_float(s)/value_int(s)/sparse_value...: let the reference implementation decode them.
    from onnx.reference import ReferenceEvaluator
    return np.asarray(ReferenceEvaluator(node, opsets={"": opset}).run(None, {})[0])


def initializer_value(tensor: onnx.TensorProto, model_name: str = "<model>") -> np.ndarray:
    try:
        return numpy_helper.to_array(tensor)
    except Exception as e:  # external data not loaded, corrupted raw_data size...
        raise ModelLoadError(f"{model_name}: cannot read initializer '{tensor.name}': {e}") from None


class Constants:
    """Name -> value of every compile-time constant of `graph` (top level only)."""

    def __init__(self, graph: onnx.GraphProto, opset: int, model_name: str = "<model>"):
        self._initializers = {t.name: t for t in graph.initializer}
        self._nodes = {n.output[0]: n for n in graph.node if is_constant_node(n) and n.output}
        self._opset = opset
        self._model_name = model_name
        self._cache: Dict[str, np.ndarray] = {}

    def __contains__(self, name: str) -> bool:
        return name in self._initializers or name in self._nodes or name in self._cache

    def value(self, name: str) -> np.ndarray:
        if name not in self._cache:
            if name in self._initializers:
                self._cache[name] = initializer_value(self._initializers[name], self._model_name)
            elif name in self._nodes:
                self._cache[name] = constant_node_value(self._nodes[name], self._opset)
            else:
                raise KeyError(name)
        return self._cache[name]

    def add(self, name: str, value: np.ndarray) -> None:
        self._cache[name] = value
