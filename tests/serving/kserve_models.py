"""A Triton-layout model repository for the KServe v2 tests and the request-path benchmark:
bare PopEFs compiled with the project's compiler from ONNX models kept next to them, so
results are checked against onnxruntime on the source model."""
import os
import sys
from typing import Optional

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "op"))


def mlp_onnx(features: int = 16, hidden: int = 32, classes: int = 8, batch: int = 4,
             seed: int = 0) -> onnx.ModelProto:
    """x [batch, features] -> Gemm -> Relu -> Gemm -> `logits` [batch, classes] (float32)."""
    rng = np.random.default_rng(seed)
    w1 = numpy_helper.from_array(rng.standard_normal((features, hidden)).astype(np.float32), "w1")
    b1 = numpy_helper.from_array(rng.standard_normal(hidden).astype(np.float32), "b1")
    w2 = numpy_helper.from_array(rng.standard_normal((hidden, classes)).astype(np.float32), "w2")
    b2 = numpy_helper.from_array(rng.standard_normal(classes).astype(np.float32), "b2")
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]),
         helper.make_node("Relu", ["h"], ["r"]),
         helper.make_node("Gemm", ["r", "w2", "b2"], ["logits"])], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (batch, features))],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, (batch, classes))],
        initializer=[w1, b1, w2, b2])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])


def write_popef_model(repository: str, name: str, model: onnx.ModelProto, outputs,
                      config: Optional[str] = None, version: int = 1) -> str:
    """Compiles `model` into `<repository>/<name>/<version>/model.popef` (source ONNX kept as
    `<repository>/<name>.onnx`, outside the model folder) with an optional config.pbtxt."""
    from compiler import Compiler
    folder = os.path.join(repository, name, str(version))
    os.makedirs(folder, exist_ok=True)
    onnx.save(model, os.path.join(repository, f"{name}.onnx"))
    Compiler.compile(model.SerializeToString(), list(outputs)).save(
        os.path.join(folder, "model.popef"))
    if config is not None:
        with open(os.path.join(repository, name, "config.pbtxt"), "w", encoding="utf-8") as f:
            f.write(config)
    return folder


def write_fused_model(repository: str, name: str = "fused", version: int = 1) -> list:
    """The seeds' fusion example (subgraphs `adder`: fp32 Add+Reshape, `concat`: fp16 Concat)
    as a bare PopEF; returns the source ONNX paths in subgraph order."""
    import shutil
    from popef_models import compile_fused_example
    work = os.path.join(repository, f"_{name}_work")
    popef = compile_fused_example(work, names=["adder", "concat"])
    folder = os.path.join(repository, name, str(version))
    os.makedirs(folder, exist_ok=True)
    shutil.copy(popef, os.path.join(folder, "model.popef"))
    return [os.path.join(work, "model0.onnx"), os.path.join(work, "model1.onnx")]


def onnxruntime_run(onnx_path: str, feeds: dict) -> dict:
    import onnxruntime
    model = onnx.load(onnx_path)
    model.ir_version = min(model.ir_version, 8)   # onnxruntime 1.31 reads IR <= 13
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def mlp_reference(onnx_path: str, x: np.ndarray, batch: int = 4) -> np.ndarray:
    """onnxruntime on the source MLP for any number of rows (run in compiled-size chunks,
    zero-padded, since the ONNX model has a fixed batch)."""
    rows = x.shape[0]
    padded = np.zeros((-(-rows // batch) * batch, x.shape[1]), np.float32)
    padded[:rows] = x
    chunks = [onnxruntime_run(onnx_path, {"x": padded[i:i + batch]})["logits"]
              for i in range(0, padded.shape[0], batch)]
    return np.concatenate(chunks)[:rows]
