"""The MLP the benchmarks time: Gemm+Relu layers and a Softmax, weights scaled by 1/sqrt(fan_in)."""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build_mlp(batch: int, sizes, seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    inits, nodes, prev = [], [], "X"
    for i, (k, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        inits.append(numpy_helper.from_array((rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32), f"W{i}"))
        inits.append(numpy_helper.from_array(np.zeros(n, np.float32), f"B{i}"))
        nodes.append(helper.make_node("Gemm", [prev, f"W{i}", f"B{i}"], [f"G{i}"]))
        nodes.append(helper.make_node("Relu", [f"G{i}"], [f"A{i}"]))
        prev = f"A{i}"
    nodes.append(helper.make_node("Softmax", [prev], ["Y"], axis=-1))
    graph = helper.make_graph(nodes, f"mlp{seed}", [helper.make_tensor_value_info("X", TensorProto.FLOAT, (batch, sizes[0]))],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, (batch, sizes[-1]))], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
