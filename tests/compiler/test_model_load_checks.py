"""Hostile or broken models are refused at load time with a CompileError naming the problem:
tensor data that does not match its dims, nodes breaking their operator schema, non-UTF-8
names, external data outside the model's folder, absurd shapes (before any allocation), and
YAML configs that are not text."""
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import Compiler
from compiler.cli_config import read_yaml
from compiler.errors import ConfigError, DeviceMemoryError, ModelLoadError
from compiler_test_helpers import F32, make_model


def _gemm_model():
    return make_model([helper.make_node("Gemm", ["X", "W"], ["O"], transB=1)], [("X", F32, [2, 4])],
                      [("O", F32, [2, 3])], {"W": np.ones((3, 4), np.float32)})


def test_initializer_bytes_not_matching_dims_are_refused():
    model = _gemm_model()
    model.graph.initializer[0].dims[:] = [0]
    with pytest.raises(ModelLoadError, match=r"initializer 'W' \(FLOAT \[0\]\) has data that does not match"):
        Compiler.compile(model)


def test_initializer_with_negative_dims_is_refused():
    model = _gemm_model()
    model.graph.initializer[0].dims[:] = [-1]
    with pytest.raises(ModelLoadError, match=r"initializer 'W' has negative dims \[-1\]"):
        Compiler.compile(model)


def test_initializer_with_unknown_data_type_is_refused():
    model = _gemm_model()
    model.graph.initializer[0].data_type = 99
    with pytest.raises(ModelLoadError, match=r"initializer 'W' has an unknown data type \(99\)"):
        Compiler.compile(model)


def test_node_without_required_attribute_is_refused():
    model = _gemm_model()
    model.graph.node[0].op_type = "Loop"
    del model.graph.node[0].attribute[:]
    with pytest.raises(ModelLoadError, match=r"node 'Loop' \(Loop, opset 13\) lacks its required attribute 'body'"):
        Compiler.compile(model)


def test_attribute_of_the_wrong_type_is_refused():
    model = _gemm_model()
    model.graph.node[0].attribute[0].type = onnx.AttributeProto.STRING
    with pytest.raises(ModelLoadError, match="attribute 'transB' is STRING, the operator expects INT"):
        Compiler.compile(model)


def test_node_with_too_many_inputs_is_refused():
    model = _gemm_model()
    model.graph.node[0].input.extend(["W", "W", "W"])
    with pytest.raises(ModelLoadError, match="has 5 inputs; the operator takes 2 to 3"):
        Compiler.compile(model)


def test_name_that_is_not_utf8_is_refused():
    data = bytearray(_gemm_model().SerializeToString())
    at = data.index(b"Gemm")
    data[at:at + 4] = b"\xa0\xa1\xa2\xa3"
    with pytest.raises(ModelLoadError, match="NodeProto.op_type .* is not UTF-8 text"):
        Compiler.compile(bytes(data))


@pytest.mark.parametrize("location,reason", [
    ("../secret.bin", "points outside the directory"),
    ("sub/../../secret.bin", "points outside the directory"),
    ("ABSOLUTE", "should be a relative path"),
    ("link.bin", "is a symbolic link"),
])
def test_external_data_outside_the_model_folder_is_refused(tmp_path, location, reason):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.ones(12, np.float32).tobytes())
    folder = tmp_path / "model"
    folder.mkdir()
    os.symlink(secret, folder / "link.bin")
    model = _gemm_model()
    weight = model.graph.initializer[0]
    weight.ClearField("raw_data")
    del weight.float_data[:]
    weight.data_location = TensorProto.EXTERNAL
    entry = weight.external_data.add()
    entry.key, entry.value = "location", str(secret) if location == "ABSOLUTE" else location
    path = folder / "model.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(ModelLoadError, match=reason):
        Compiler.compile(str(path))


def test_expand_to_an_absurd_shape_is_refused_before_allocation():
    model = make_model([helper.make_node("Expand", ["X", "s"], ["O"])], [("X", F32, [1, 1])], [("O", F32, None)],
                       {"s": np.array([1 << 20, 1 << 20], np.int64)})
    with pytest.raises(DeviceMemoryError, match=r"output 'O' \(float32 \[1048576, 1048576\]\) needs "
                                                r"4,398,046,511,104 bytes"):
        Compiler.compile(model)


def test_input_dims_whose_byte_count_overflows_int64_are_refused():
    model = make_model([helper.make_node("Relu", ["X"], ["O"])], [("X", F32, [1 << 32, 1 << 32])],
                       [("O", F32, [1 << 32, 1 << 32])])
    with pytest.raises(DeviceMemoryError, match="input 'X'"):
        Compiler.compile(model)


def test_an_input_larger_than_the_device_is_refused_before_the_converter_infers_types():
    model = make_model([helper.make_node("Transpose", ["X"], ["T"]), helper.make_node("Gather", ["T", "i"], ["O"])],
                       [("X", TensorProto.FLOAT16, [1 << 31])], [("O", TensorProto.FLOAT16, None)],
                       {"i": np.array([0, 1], np.int64)})
    with pytest.raises(DeviceMemoryError) as e:
        Compiler.compile(model)
    assert str(e.value) == ("<model 'test'>: input 'X' (float16 [2147483648]) needs 4,294,967,296 bytes, more than "
                            "the device memory of 940,572,672; reduce the batch size or the input shapes")


_INFER_HUGE_ONE_DIM_INPUT = """
import resource, sys
import numpy as np
from onnx import TensorProto, helper
sys.path.insert(0, sys.argv[1])
from compiler_test_helpers import make_model
from compiler.onnx_graph.type_inference import infer_types
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
model = make_model([helper.make_node("Transpose", ["X"], ["T"]), helper.make_node("Gather", ["T", "i"], ["O"])],
                   [("X", TensorProto.FLOAT16, [1 << 31])], [("O", TensorProto.FLOAT16, None)],
                   {"i": np.array([0, 1], np.int64)})
print(infer_types(model).types["O"])
"""


def test_type_inference_of_a_huge_one_dim_tensor_takes_no_memory_for_it():
    # onnx's data propagation would hold a [2^31] tensor as 2^31 unknown values (13 GB): the
    # address-space limit turns that into a failure instead of taking the machine's memory.
    here = os.path.dirname(os.path.abspath(__file__))
    done = subprocess.run([sys.executable, "-c", _INFER_HUGE_ONE_DIM_INPUT, here], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "float16 [2]"


def test_yaml_config_that_is_not_utf8_is_a_config_error(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_bytes(b"output_dir: './'\nmodel_fusion: \xff\n")
    with pytest.raises(ConfigError, match="not valid YAML: not UTF-8 text"):
        read_yaml(str(path))


def test_op_used_before_the_opset_that_introduced_it_is_refused():
    model = make_model([helper.make_node("Einsum", ["X"], ["O"], equation="ij->ji")], [("X", F32, [2, 3])],
                       [("O", F32, [3, 2])], opset=11)
    with pytest.raises(ModelLoadError, match=r"\(Einsum, opset 11\): the operator does not exist in opset 11 "
                                             r"\(it was added in opset 12\)"):
        Compiler.compile(model)


@pytest.mark.parametrize("options,message", [
    (dict(batch_size=1 << 64), "batch_size 18446744073709551616 is larger than an ONNX dim can be"),
    (dict(input_shape={"X": [1 << 63, 4]}), "input_shape for 'X' has a dim larger than an ONNX dim can be"),
])
def test_batch_size_or_input_dim_beyond_int64_is_a_config_error(options, message):
    from compiler.converter import Converter
    with pytest.raises(ConfigError, match=message):
        Converter(**options).convert(_gemm_model())


def test_a_required_input_with_an_empty_name_is_refused():
    # An empty name means "omitted", which only an optional input may be: constant folding
    # would otherwise run the node without it.
    model = make_model([helper.make_node("Transpose", [""], ["O"], name="t")], [("X", F32, [2])], [("O", F32, None)])
    with pytest.raises(ModelLoadError) as e:
        Compiler.compile(model)
    assert str(e.value) == ("<model 'test'>: node 't' (Transpose, opset 13): input 0 ('data') is required but its "
                            "name is empty")
