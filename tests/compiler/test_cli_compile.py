"""The CLI through subprocess, as users run it: `python -m compiler.cli ...`."""
import os
import textwrap

import numpy as np
import onnx
import pytest
from onnx import helper

from popef.reader import PopefFile
from compiler_test_helpers import F32, make_model, run_cli


@pytest.fixture
def workdir(tmp_path):
    nodes = [helper.make_node("Gemm", ["X", "W", "B"], ["g"], name="gemm"), helper.make_node("Relu", ["g"], ["r"]),
             helper.make_node("Add", ["r", "Y"], ["O"], name="add")]
    model = make_model(nodes, [("X", F32, ["N", 3]), ("Y", F32, ["N", 2])], [("O", F32, ["N", 2])],
                       {"W": np.ones((3, 2), np.float32), "B": np.zeros(2, np.float32)}, opset=11)
    onnx.save(model, str(tmp_path / "model.onnx"))
    return tmp_path


def _ok(result):
    assert result.returncode == 0, result.stderr
    return result.stdout


def _user_error(result):
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_compile_and_export(workdir):
    out = _ok(run_cli(["--input_model", "model.onnx", "--input_shape", "X=4,3", "Y=4,2", "--export_popef",
                       "--output_dir", "out"], cwd=str(workdir)))
    assert os.path.isfile(workdir / "out" / "executable.onnx") and os.path.isfile(workdir / "out" / "executable.popef")
    assert "inputs:  X float32 [4, 3] (batch axis 0); Y float32 [4, 2] (batch axis 0)" in out
    assert "outputs: O float32 [4, 2]" in out
    assert "passes:  input_shape_override, const_batch_size, input_type_check, input_size_check, constant_folding" in out
    assert "fused:   1 FusedGemm" in out  # Gemm + Relu: one step, whose output is the Add's input
    assert "device memory: weights 128 + activations 64 = 192 bytes of 940,572,672" in out
    assert os.path.join("out", "executable.popef") in out
    popef = PopefFile.open(str(workdir / "out" / "executable.popef"))
    assert popef.metadata["batch_size"] == 4
    converted = onnx.load(str(workdir / "out" / "executable.onnx"))
    assert [n.op_type for n in converted.graph.node] == ["Gemm", "Relu", "Add"]


def test_repeated_input_shape_flags_output_model_stem_and_no_popef_by_default(workdir):
    _ok(run_cli(["--input_model", "model.onnx", "--input_shape", "X=2,3", "--input_shape", "Y=2,2",
                 "--output_model", "mine.onnx"], cwd=str(workdir)))
    assert os.path.isfile(workdir / "mine.onnx") and not os.path.exists(workdir / "mine.popef")


def test_precision_ipu_version_batch_size(workdir):
    _ok(run_cli(["--input_model", "model.onnx", "--batch_size", "8", "--precision", "fp16", "--ipu_version", "ipu21",
                 "--export_popef"], cwd=str(workdir)))
    popef = PopefFile.open(str(workdir / "executable.popef"))
    md = popef.metadata
    assert md["ipu_version"] == "ipu21" and md["batch_size"] == 8
    assert [(a["name"], a["dtype"], a["shape"]) for a in md["anchors"]] == \
        [("X", "float16", [8, 3]), ("Y", "float16", [8, 2]), ("O", "float16", [8, 2])]
    info = popef.opaque_json("compiler")
    assert info["options"]["ipu_version"] == "ipu21" and info["converter_options"]["precision"] == "fp16"


def test_passes_and_skip_passes(workdir):
    _ok(run_cli(["--input_model", "model.onnx", "--batch_size", "2", "--skip_passes",
                 "eliminate_identity,fuse_consecutive_transposes", "--export_popef"], cwd=str(workdir)))
    passes = PopefFile.open(str(workdir / "executable.popef")).opaque_json("compiler")["passes"]
    assert "eliminate_identity" not in passes and "fuse_consecutive_transposes" not in passes and "sort_graph" in passes
    _ok(run_cli(["--input_model", "model.onnx", "--input_shape", "X=2,3", "Y=2,2", "--passes",
                 "input_shape_override,shape_inference,final_check", "--export_popef"], cwd=str(workdir)))
    passes = PopefFile.open(str(workdir / "executable.popef")).opaque_json("compiler")["passes"]
    assert passes == ["input_shape_override", "shape_inference", "final_check"]
    line = _user_error(run_cli(["--input_model", "model.onnx", "--passes", "constant_folding,bogus"], cwd=str(workdir)))
    assert line.startswith("error: unknown pass 'bogus'; known passes: const_batch_size, constant_folding")


def test_max_tensor_size(workdir):
    # Folding Transpose(W) creates a 4096-byte constant.
    nodes = [helper.make_node("Transpose", ["W"], ["Wt"]), helper.make_node("MatMul", ["X", "Wt"], ["O"])]
    model = make_model(nodes, [("X", F32, [2, 32])], [("O", F32, [2, 32])],
                       {"W": np.arange(1024, dtype=np.float32).reshape(32, 32)})
    onnx.save(model, str(workdir / "tr.onnx"))
    _ok(run_cli(["--input_model", "tr.onnx", "--max_tensor_size", "4095", "--output_model", "small"], cwd=str(workdir)))
    _ok(run_cli(["--input_model", "tr.onnx", "--max_tensor_size", "4096", "--output_model", "big"], cwd=str(workdir)))
    assert [n.op_type for n in onnx.load(str(workdir / "small.onnx")).graph.node] == ["Transpose", "MatMul"]
    assert [n.op_type for n in onnx.load(str(workdir / "big.onnx")).graph.node] == ["MatMul"]


def test_convert_version(workdir):
    _ok(run_cli(["--input_model", "model.onnx", "--batch_size", "1", "--convert_version", "13"], cwd=str(workdir)))
    assert onnx.load(str(workdir / "executable.onnx")).opset_import[0].version == 13


def test_list_all_passes():
    out = _ok(run_cli(["--list_all_passes"]))
    lines = out.splitlines()
    assert any(line.split()[:2] == ["*", "constant_folding"] and "max_tensor_size" in line for line in lines)
    assert any(line.split()[:2] == ["*", "final_check"] for line in lines)
    assert "default pipeline" in lines[-1]


def test_yaml_config_paths_relative_to_the_yaml_and_flags_override(workdir, tmp_path_factory):
    (workdir / "config.yaml").write_text(textwrap.dedent("""\
        input_model: 'model.onnx'
        input_shape: ['X=2,3', 'Y=2,2']
        output_dir: 'build'
        output_model: 'from_yaml'
        export_popef: True
        max_tensor_size: -1
        ipu_version: ipu21
    """))
    elsewhere = tmp_path_factory.mktemp("cwd")
    _ok(run_cli(["--config_yaml", str(workdir / "config.yaml"), "--output_model", "from_flag"], cwd=str(elsewhere)))
    popef = PopefFile.open(str(workdir / "build" / "from_flag.popef"))
    assert popef.metadata["ipu_version"] == "ipu21" and popef.metadata["batch_size"] == 2
    assert not os.path.exists(workdir / "build" / "from_yaml.popef")


def test_yaml_input_shape_as_a_mapping(workdir):
    (workdir / "map.yaml").write_text("input_model: model.onnx\ninput_shape: {X: [5, 3], Y: '5,2'}\n"
                                      "export_popef: true\n")
    _ok(run_cli(["--config_yaml", "map.yaml"], cwd=str(workdir)))
    anchors = PopefFile.open(str(workdir / "executable.popef")).metadata["anchors"]
    assert [a["shape"] for a in anchors] == [[5, 3], [5, 2], [5, 2]]


def test_yaml_errors(workdir):
    (workdir / "typo.yaml").write_text("input_model: model.onnx\nexport_pope: true\n")
    line = _user_error(run_cli(["--config_yaml", "typo.yaml"], cwd=str(workdir)))
    assert "typo.yaml: unknown key 'export_pope'; valid keys: input_model, input_shape" in line
    (workdir / "fusion.yaml").write_text("model_fusion:\n  - input_model: model.onnx\n")
    line = _user_error(run_cli(["--config_yaml", "fusion.yaml"], cwd=str(workdir)))
    # Fusion is supported (tests/compiler/fusion); its errors name the entry.
    assert line.startswith("error: fusion.yaml: model_fusion[0] (") and "graph input 'X' has shape [N, 3]" in line
    (workdir / "badtype.yaml").write_text("input_model: model.onnx\nbatch_size: four\n")
    assert "batch_size must be an integer, got 'four'" in _user_error(run_cli(["--config_yaml", "badtype.yaml"],
                                                                             cwd=str(workdir)))
    assert "config file not found" in _user_error(run_cli(["--config_yaml", "none.yaml"], cwd=str(workdir)))


@pytest.mark.parametrize("args, expected", [
    (["--input_model", "missing.onnx"], "error: missing.onnx: file not found"),
    (["--input_model", "model.onnx", "--input_shape", "X:4,3"],
     "error: bad --input_shape 'X:4,3': expected NAME=d0,d1,... (e.g. X=4,2)"),
    (["--input_model", "model.onnx", "--input_shape", "Z=1,3"],
     "error: model.onnx: --input_shape names 'Z', which is not an input of the model; its inputs are: X, Y"),
    (["--input_model", "model.onnx"], "error: model.onnx: graph input 'X' has shape [N, 3], which is not static"),
    ([], "error: --input_model is required (or input_model in --config_yaml)"),
    (["--input_model", "model.onnx", "--precision", "fp8"], "error: argument --precision: invalid choice: 'fp8'"),
    (["--input_model", "model.onnx", "--batch_size", "many"], "error: argument --batch_size: invalid int value"),
])
def test_user_errors_exit_2_with_one_line(workdir, args, expected):
    assert _user_error(run_cli(args, cwd=str(workdir))).startswith(expected)


def test_unsupported_op_and_too_big_model_errors(workdir):
    model = make_model([helper.make_node("Hardmax", ["X"], ["O"], name="erf_0")], [("X", F32, [2])], [("O", F32, [2])])
    onnx.save(model, str(workdir / "erf.onnx"))
    line = _user_error(run_cli(["--input_model", "erf.onnx"], cwd=str(workdir)))
    assert line.startswith("error: erf.onnx: unsupported op 'Hardmax' (node 'erf_0'); the emulator supports Abs, Add")
    nodes = [helper.make_node("MatMul", ["A", "B"], ["G"]), helper.make_node("Relu", ["G"], ["O"])]
    big = make_model(nodes, [("A", F32, [16384, 1]), ("B", F32, [1, 16384])], [("O", F32, [16384, 16384])])
    onnx.save(big, str(workdir / "big.onnx"))
    line = _user_error(run_cli(["--input_model", "big.onnx"], cwd=str(workdir)))
    assert "needs 1,073,741,824 bytes of device memory (weights 0 + activations 1,073,741,824)" in line


def test_run_uses_the_runtime_lazily(workdir):
    # A stand-in runtime package first on the path records what the CLI feeds it; the compiler
    # must import it only for --run.
    fake = workdir / "fake_runtime" / "tf_popef_op"
    (fake / "runtime").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "runtime" / "__init__.py").write_text(textwrap.dedent("""\
        import json, numpy as np
        class ModelRunner:
            def __init__(self, executable, config=None):
                self.metadata = json.loads(json.dumps(executable.metadata))
            def execute(self, inputs, outputs):
                for name, value in outputs.items():
                    value[...] = inputs["Y"] + 1
                print("fed", sorted((k, v.dtype.name, list(v.shape)) for k, v in inputs.items()))
    """))
    result = run_cli(["--input_model", "model.onnx", "--batch_size", "3", "--run"], cwd=str(workdir),
                     first_on_path=str(workdir / "fake_runtime"))
    assert result.returncode == 0, result.stderr
    assert "fed [('X', 'float32', [3, 3]), ('Y', 'float32', [3, 2])]" in result.stdout
    assert "ran once on the emulator with random inputs:\n  O: float32 [3, 2]" in result.stdout
