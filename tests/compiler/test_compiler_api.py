import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler import Compiler, CompilerOptions, Executable
from compiler.converter import Converter
from compiler.errors import CompileError, ConfigError
from compiler.utils import get_logger
from compiler_test_helpers import F16, F32, make_model, run_python


def _seed_add_model():
    """PopRT's dynamic_batch_size.py model."""
    add = helper.make_node("Add", ["X", "Y"], ["O"])
    graph = helper.make_graph([add], "test", [helper.make_tensor_value_info("X", TensorProto.FLOAT, (4, 2)),
                                              helper.make_tensor_value_info("Y", TensorProto.FLOAT, (4, 2))],
                              [helper.make_tensor_value_info("O", TensorProto.FLOAT, (4, 2))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])


def _seed_fusion_model0():
    g = helper.make_graph([helper.make_node("Add", ["X", "Y"], ["Z"]), helper.make_node("Reshape", ["Z", "C"], ["O"])],
                          "graph", [helper.make_tensor_value_info("X", F32, (1, 2)),
                                    helper.make_tensor_value_info("Y", F32, (1, 2))],
                          [helper.make_tensor_value_info("O", F32, (2,))],
                          [helper.make_tensor("C", TensorProto.INT64, (1,), vals=np.array([2], np.int64).tobytes(), raw=True)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])


def test_seed_dynamic_batch_model_compiles_from_bytes():
    model = _seed_add_model()
    exe = Compiler.compile(model.SerializeToString(), [o.name for o in model.graph.output])
    assert isinstance(exe, Executable)
    md = exe.metadata
    assert (md["batch_size"], md["batch_axis"], md["ipu_version"], md["num_ipus"]) == (4, 0, "ipu2", 1)
    assert [(a["name"], a["direction"], a["dtype"], a["shape"], a["batch_axis"]) for a in md["anchors"]] == \
        [("X", "input", "float32", [4, 2], 0), ("Y", "input", "float32", [4, 2], 0), ("O", "output", "float32", [4, 2], 0)]
    assert [s["op"] for s in exe.executable["programs"]["main"]] == ["Add"]
    assert exe.to_bytes()[:8] == b"POPEFBLB"


def test_output_reshaped_to_2_has_no_batch_axis():
    exe = Compiler.compile(_seed_fusion_model0(), ["O"])
    assert [(a["name"], a["batch_axis"]) for a in exe.anchors()] == [("X", 0), ("Y", 0), ("O", -1)]
    main = exe.executable["programs"]["main"]
    assert [s["op"] for s in main] == ["Add", "Reshape"]


def test_fp16_model_with_a_constant_concat():
    g = helper.make_graph([helper.make_node("Concat", ["X", "C"], ["O"], axis=1)], "graph",
                          [helper.make_tensor_value_info("X", F16, (1, 1))], [helper.make_tensor_value_info("O", F16, (1, 3))],
                          [helper.make_tensor("C", F16, (1, 2), vals=np.array([[1.5, 2.0]], np.float16).tobytes(), raw=True)])
    exe = Compiler.compile(helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)]), ["O"])
    assert [(a["name"], a["dtype"]) for a in exe.anchors()] == [("X", "float16"), ("O", "float16")]
    assert exe.metadata["tensor_data"] == [{"name": "C", "dtype": "float16", "shape": [1, 2], "nbytes": 4}]
    from popef.reader import PopefFile
    np.testing.assert_array_equal(PopefFile(exe.to_bytes()).tensor_data()["C"], [[1.5, 2.0]])


def test_converted_fp16_model_compiles_with_float16_anchors():
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("Gemm", ["X", "W", "B"], ["G"]), helper.make_node("Relu", ["G"], ["A"]),
             helper.make_node("Softmax", ["A"], ["Y"], axis=-1)]
    model = make_model(nodes, [("X", F32, [2, 8])], [("Y", F32, [2, 4])],
                       {"W": rng.standard_normal((8, 4)).astype(np.float32), "B": np.zeros(4, np.float32)})
    converted = Converter(precision="fp16").convert(model)
    exe = Compiler.compile(converted.SerializeToString(), ["Y"])
    assert [a["dtype"] for a in exe.anchors()] == ["float16", "float16"]
    assert {t["dtype"] for t in exe.metadata["tensor_data"]} == {"float16"}
    softmax = exe.executable["programs"]["main"][-1]
    assert softmax["op"] == "Softmax" and softmax["attrs"] == {"axis": 1, "coerce_2d": 0}


def test_requested_outputs_may_be_intermediate_tensors():
    nodes = [helper.make_node("Relu", ["X"], ["r"]), helper.make_node("Sigmoid", ["r"], ["O"])]
    model = make_model(nodes, [("X", F32, [3])], [("O", F32, [3])])
    exe = Compiler.compile(model, ["r"])
    assert [a["name"] for a in exe.anchors("output")] == ["r"]
    assert [s["op"] for s in exe.executable["programs"]["main"]] == ["Relu"]  # Sigmoid is dead code now
    exe = Compiler.compile(model, ["O", "r"])
    assert [a["name"] for a in exe.anchors("output")] == ["O", "r"]
    with pytest.raises(CompileError, match="requested output\\(s\\) nope are not tensors of the model; its outputs are O"):
        Compiler.compile(model, ["nope"])


def test_compiler_options_are_attribute_style_and_validated():
    options = CompilerOptions()
    assert (options.ipu_version, options.num_ipus, options.batch_size, options.batch_axis, options.max_tensor_size,
            options.device_memory_bytes) == ("ipu2", 1, None, 0, -1, None)
    options.ipu_version = "ipu21"
    options.batch_size = 4
    with pytest.raises(AttributeError):
        options.ipu_verison = "ipu21"  # misspelt: refused, not silently ignored
    exe = Compiler.compile(make_model([helper.make_node("Relu", ["X"], ["O"])], [("X", F32, ["N", 2])],
                                      [("O", F32, ["N", 2])]), ["O"], options)
    assert exe.metadata["ipu_version"] == "ipu21" and exe.metadata["batch_size"] == 4
    assert exe.anchors("input")[0]["shape"] == [4, 2]
    with pytest.raises(ConfigError, match="ipu_version must be one of ipu2, ipu21, got 'ipu3'"):
        CompilerOptions(ipu_version="ipu3").validate()
    with pytest.raises(ConfigError, match="num_ipus must be an integer >= 1"):
        CompilerOptions(num_ipus=0).validate()


def test_compiler_opaque_records_options_passes_and_source():
    exe = Compiler.compile(_seed_add_model(), ["O"], CompilerOptions(batch_size=4))
    import json
    info = json.loads(exe.opaques["compiler"])
    assert info["options"]["batch_size"] == 4 and info["passes"][-1] == "final_check"
    assert info["source_model"] == "<model 'test'>" and info["producer"].startswith("tf-popef ")
    assert info["converter_options"]["precision"] == "fp32"


def test_executable_save_load_round_trip(tmp_path):
    exe = Compiler.compile(_seed_add_model(), ["O"])
    path = tmp_path / "e.popef"
    exe.save(str(path))
    again = Executable.load(str(path))
    assert again.to_bytes() == exe.to_bytes() and again.metadata == exe.metadata
    assert repr(again).startswith("Executable(ipu2, inputs [X, Y], outputs [O]")
    with pytest.raises(FileNotFoundError):
        Executable.load(str(tmp_path / "missing.popef"))


def test_unsupported_op_is_a_compile_error():
    model = make_model([helper.make_node("Hardmax", ["X"], ["O"], name="erf0")], [("X", F32, [2])], [("O", F32, [2])])
    with pytest.raises(CompileError, match="unsupported op 'Hardmax' \\(node 'erf0'\\)"):
        Compiler.compile(model, ["O"])


def test_get_logger_is_the_compilers_logger():
    logger = get_logger()
    assert logger.name == "compiler" and get_logger("x").name == "compiler.x"


def test_compiler_never_imports_tensorflow_or_the_runtime():
    code = ("import sys, compiler, compiler.cli, popef.dump, compiler.converter, compiler.lowering;"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'tf_popef_op')];"
            "print(bad); sys.exit(1 if bad else 0)")
    result = run_python(code)
    assert result.returncode == 0, result.stdout + result.stderr
