"""Small ONNX models for the fusion tests (tests/compiler/fusion and tests/fusion): the PopRT
tutorial's two models plus families that differ in opset, input names, input count, output
count and ops, and a zoo that cycles through them for N-model fusion."""
import copy
from typing import Dict, List, Optional, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F32, F16, I64 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT64


def _model(nodes, inputs, outputs, initializers, opset, name="graph"):
    graph = helper.make_graph(nodes, name,
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    return model


def tutorial_model0(opset: int = 11) -> onnx.ModelProto:
    """PopRT tutorial model0: O = reshape(X + Y, [2]), X, Y float32 [1, 2]."""
    nodes = [helper.make_node("Add", ["X", "Y"], ["Z"]), helper.make_node("Reshape", ["Z", "C"], ["O"])]
    return _model(nodes, [("X", F32, (1, 2)), ("Y", F32, (1, 2))], [("O", F32, (2,))],
                  {"C": np.array([2], np.int64)}, opset)


def tutorial_model1(opset: int = 11) -> onnx.ModelProto:
    """PopRT tutorial model1 (a float16 model): O = concat(X, [[1.5, 2]]) on axis 1."""
    nodes = [helper.make_node("Concat", ["X", "C"], ["O"], axis=1)]
    return _model(nodes, [("X", F16, (1, 1))], [("O", F16, (1, 3))], {"C": np.array([[1.5, 2.0]], np.float16)}, opset)


def mlp_model(in_name: str = "X", out_name: str = "Y", sizes: Sequence[int] = (8, 16, 4), seed: int = 0,
              opset: int = 13, weights: Optional[Dict[str, np.ndarray]] = None) -> onnx.ModelProto:
    """Gemm+Relu layers then Softmax; batch dim symbolic ("N"). `weights` replaces generated
    initializers by name (W0, B0, W1...), e.g. to share one big weight between models."""
    rng = np.random.default_rng(seed)
    inits, nodes, prev = {}, [], in_name
    for i, (k, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        inits[f"W{i}"] = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        inits[f"B{i}"] = (0.1 * rng.standard_normal(n)).astype(np.float32)
        nodes.append(helper.make_node("Gemm", [prev, f"W{i}", f"B{i}"], [f"G{i}"]))
        if i < len(sizes) - 2:
            nodes.append(helper.make_node("Relu", [f"G{i}"], [f"A{i}"]))
            prev = f"A{i}"
        else:
            prev = f"G{i}"
    inits.update(weights or {})
    nodes.append(helper.make_node("Softmax", [prev], [out_name], axis=1 if opset < 13 else -1))
    return _model(nodes, [(in_name, F32, ("N", sizes[0]))], [(out_name, F32, ("N", sizes[-1]))], inits, opset)


def gated_model(names: Sequence[str] = ("a", "b"), width: int = 6, seed: int = 1, opset: int = 17) -> onnx.ModelProto:
    """Two inputs, two outputs: h = tanh(a @ W) * sigmoid(b); out = h - b; summary = transpose(h)
    (the second output has no batch axis 0)."""
    a, b = names
    rng = np.random.default_rng(seed)
    nodes = [helper.make_node("MatMul", [a, "W"], ["m"]), helper.make_node("Tanh", ["m"], ["t"]),
             helper.make_node("Sigmoid", [b], ["s"]), helper.make_node("Mul", ["t", "s"], ["h"]),
             helper.make_node("Sub", ["h", b], ["out"]),
             helper.make_node("Transpose", ["h"], ["summary"], perm=[1, 0])]
    return _model(nodes, [(a, F32, ("N", 5)), (b, F32, ("N", width))],
                  [("out", F32, ("N", width)), ("summary", F32, (width, "N"))],
                  {"W": (rng.standard_normal((5, width)) / 3).astype(np.float32)}, opset)


def softmax3d_model(in_name: str = "features", opset: int = 11) -> onnx.ModelProto:
    """Softmax on axis 1 of a rank-3 tensor: opset < 13 normalizes over dims [1:] flattened,
    opset >= 13 over dim 1 only (the lowering must keep each model's own semantics)."""
    nodes = [helper.make_node("Mul", [in_name, "scale"], ["scaled"]),
             helper.make_node("Softmax", ["scaled"], ["probs"], axis=1),
             helper.make_node("Flatten", ["probs"], ["flat"], axis=1)]
    return _model(nodes, [(in_name, F32, ("N", 3, 4))], [("flat", F32, ("N", 12))],
                  {"scale": np.array(0.5, np.float32)}, opset)


def zoo(count: int) -> List[dict]:
    """`count` fusion entries (mappings; input_model is the ModelProto) cycling through the
    families above with mixed opsets, input names, precisions and batch sizes."""
    variants = [
        lambda i: dict(input_model=mlp_model(f"in{i}", "probs", (6, 10, 3), seed=i, opset=13), precision="fp32",
                       batch_size=2),
        lambda i: dict(input_model=gated_model((f"x{i}", "gate"), seed=i, opset=17), precision="fp16", batch_size=3),
        lambda i: dict(input_model=softmax3d_model("features", opset=11), precision="fp32", batch_size=1),
        lambda i: dict(input_model=mlp_model("X", "Y", (4, 8, 5), seed=100 + i, opset=11), precision="fp16",
                       batch_size=4),
        lambda i: dict(input_model=softmax3d_model(f"f{i}", opset=13), precision="fp16", batch_size=2),
    ]
    return [variants[i % len(variants)](i) for i in range(count)]


def ort_outputs(model: onnx.ModelProto, feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """onnxruntime on the original model (the oracle); IR lowered to what it reads."""
    import onnxruntime as ort
    oracle = copy.deepcopy(model)
    oracle.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(oracle.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def model_input_dtype(model: onnx.ModelProto, name: str) -> np.dtype:
    for i in model.graph.input:
        if i.name == name:
            return np.dtype(helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type))
    raise KeyError(name)
