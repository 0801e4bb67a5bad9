"""Seed inputs of the fuzz targets: small ONNX models, the PopEF files the compiler makes of them,
and the hand-written PopEF files of the runtime tests (tests/runtime/popef_builders.py)."""
import functools
import os
import sys
from typing import Dict, List

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _path in (os.path.dirname(_TESTS), os.path.join(_TESTS, "runtime")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import popef_builders  # noqa: E402  (tests/runtime, put on the path above)

F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(name, nodes, inputs, outputs, initializers=(), opset=13) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs], list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _weight(name, shape, seed):
    return numpy_helper.from_array(np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32), name)


def onnx_seeds() -> Dict[str, onnx.ModelProto]:
    """Small models covering convolution, matmul, reshape, elementwise, pooling and softmax."""
    conv_matmul = _model("conv_matmul", [
        helper.make_node("Conv", ["X", "W"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Reshape", ["r", "flat"], ["f"]),
        helper.make_node("MatMul", ["f", "M"], ["m"]),
        helper.make_node("Add", ["m", "B"], ["O"]),
    ], [("X", F32, [1, 2, 4, 4])], [("O", F32, [1, 3])],
        [_weight("W", [2, 2, 3, 3], 1), numpy_helper.from_array(np.array([1, 32], np.int64), "flat"),
         _weight("M", [32, 3], 2), _weight("B", [3], 3)])
    add_reshape = _model("add_reshape", [
        helper.make_node("Add", ["X", "Y"], ["Z"]),
        helper.make_node("Reshape", ["Z", "C"], ["O"]),
    ], [("X", F32, [1, 2]), ("Y", F32, [1, 2])], [("O", F32, [2])],
        [numpy_helper.from_array(np.array([2], np.int64), "C")], opset=11)
    gemm_pool = _model("gemm_pool", [
        helper.make_node("MaxPool", ["X"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "G", "H"], ["g"], transB=1),
        helper.make_node("Softmax", ["g"], ["O"], axis=-1),
    ], [("X", F32, [2, 1, 4, 4])], [("O", F32, [2, 5])], [_weight("G", [5, 4], 4), _weight("H", [5], 5)])
    return {"conv_matmul": conv_matmul, "add_reshape": add_reshape, "gemm_pool": gemm_pool}


@functools.lru_cache(maxsize=None)
def popef_seeds() -> Dict[str, bytes]:
    """PopEF files: the runtime tests' hand-written models and the compiled ONNX seeds."""
    from compiler import Compiler
    seeds = {
        "add": popef_builders.add_model().to_bytes(),
        "weight": popef_builders.weight_model(np.arange(8, dtype=np.float32).reshape(4, 2) / 8).to_bytes(),
        "flatten_output": popef_builders.flatten_output_model().to_bytes(),
        "fused": popef_builders.fused_model().to_bytes(),
    }
    for name, model in onnx_seeds().items():
        seeds[f"compiled_{name}"] = Compiler.compile(model).to_bytes()
    return seeds


FUSION_YAML = """\
output_dir: './'
output_model: 'executable'
export_popef: True
max_tensor_size: -1
batch_size: 1
model_fusion:
  - input_model: 'add_reshape.onnx'
    input_shape: ['X=1,2', 'Y=1,2']
    precision: 'fp32'
  - input_model: 'conv_matmul.onnx'
    precision: 'fp16'
    name: 'convnet'
"""


def fusion_config_seeds() -> List[bytes]:
    return [FUSION_YAML.encode("utf-8")]


def write_fusion_models(folder: str) -> None:
    """The models the fusion YAML seeds name, written into `folder`."""
    for name, model in onnx_seeds().items():
        onnx.save(model, os.path.join(folder, f"{name}.onnx"))
