"""`python -m compiler.cli --config_yaml` with model_fusion, as users run it: paths relative to
the YAML, global keys vs entry overrides vs flags, and every config error (exit 2, one line
naming the file, the entry and the key)."""
import os
import textwrap

import onnx
import pytest

from popef.reader import PopefFile
from compiler_test_helpers import run_cli
from fusion_test_models import gated_model, mlp_model, tutorial_model0, tutorial_model1

TUTORIAL_YAML = """\
output_dir: './'
output_model: 'executable'
export_popef: True
max_tensor_size: -1
model_fusion:
  - input_model: 'model0.onnx'
    input_shape: ['X=1,2', 'Y=1,2']
    precision: 'fp32'

  - input_model: 'model1.onnx'
    input_shape: ['X=1,1']
    precision: 'fp16'
"""


@pytest.fixture
def workdir(tmp_path):
    onnx.save(tutorial_model0(), str(tmp_path / "model0.onnx"))
    onnx.save(tutorial_model1(), str(tmp_path / "model1.onnx"))
    onnx.save(mlp_model(), str(tmp_path / "mlp.onnx"))
    onnx.save(gated_model(("a", "b")), str(tmp_path / "gated.onnx"))
    return tmp_path


def write(workdir, text, name="config.yaml"):
    (workdir / name).write_text(textwrap.dedent(text))
    return name


def ok(result):
    assert result.returncode == 0, result.stderr
    return result.stdout


def user_error(result):
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0][len("error: "):]


def test_tutorial_config_from_another_folder(workdir, tmp_path_factory):
    write(workdir, TUTORIAL_YAML)
    elsewhere = tmp_path_factory.mktemp("cwd")
    out = ok(run_cli(["--config_yaml", str(workdir / "config.yaml")], cwd=str(elsewhere)))
    path = workdir / "executable.popef"  # output_dir './' is relative to the YAML too
    assert os.path.isfile(path) and not os.listdir(elsewhere)
    assert not os.path.exists(workdir / "executable.onnx")  # fusion writes only the PopEF
    assert "fused 2 model(s) for ipu2; input 'index' (int32 [1]) selects the subgraph" in out
    assert f"[0] graph0: {workdir / 'model0.onnx'}, fp32, opset 11, batch size 1" in out
    assert ("inputs:  graph0/stream0 (X) float32 [1, 2] (batch axis 0); graph0/stream1 (Y) float32 [1, 2] "
            "(batch axis 0)") in out
    assert "outputs: graph1/O (O) float16 [1, 3] (batch axis 0)" in out
    assert "(deduplicated)" in out and f"PopEF: {path}" in out
    popef = PopefFile.open(str(path))
    assert popef.metadata["anchors"][0]["name"] == "index"
    assert [s["precision"] for s in popef.opaque_json("fusion")["subgraphs"]] == ["fp32", "fp16"]


def test_globals_entry_overrides_and_flags(workdir):
    write(workdir, """\
        precision: fp16
        batch_size: 2
        ipu_version: ipu21
        output_model: fused.popef
        model_fusion:
          - input_model: mlp.onnx
          - input_model: gated.onnx
            precision: fp32
            batch_size: 5
            name: gate
          - input_model: model1.onnx
            batch_size: 1
            passes: input_shape_override,shape_inference,final_check
    """)
    ok(run_cli(["--config_yaml", "config.yaml", "--output_dir", "out", "--batch_size", "3"], cwd=str(workdir)))
    popef = PopefFile.open(str(workdir / "out" / "fused.popef"))
    assert popef.metadata["ipu_version"] == "ipu21"
    sgs = popef.opaque_json("fusion")["subgraphs"]
    # mlp: global fp16 and the flag's batch size 3 (flags replace top-level keys); gated: its own keys.
    assert [(s["name"], s["precision"], s["batch_size"]) for s in sgs] == [
        ("graph0", "fp16", 3), ("gate", "fp32", 5), ("graph2", "fp16", 1)]
    anchors = {a["name"]: a for a in popef.metadata["anchors"]}
    assert anchors["graph0/stream0"]["dtype"] == "float16" and anchors["graph0/stream0"]["shape"] == [3, 8]
    assert anchors["graph1/stream1"]["aliases"] == ["graph1/b"] and anchors["graph1/stream1"]["shape"] == [5, 6]
    passes = popef.opaque_json("compiler")["models"][2]["passes"]
    assert passes == ["input_shape_override", "shape_inference", "final_check"]


def test_run_flag_runs_each_subgraph(workdir):
    write(workdir, TUTORIAL_YAML)
    out = ok(run_cli(["--config_yaml", "config.yaml", "--run"], cwd=str(workdir)))
    assert "ran once on the emulator with random inputs (each subgraph once):" in out
    assert "graph0/O: float32 [2]" in out and "graph1/O: float16 [1, 3]" in out


ENTRY0 = "  - input_model: model0.onnx\n"
ENTRY1 = "  - input_model: model1.onnx\n"


@pytest.mark.parametrize("yaml_text, expected", [
    ("model_fusion:\n" + ENTRY0 + ENTRY1 + "    precison: fp16\n",
     "config.yaml: model_fusion[1]: unknown key 'precison'; valid keys of a model_fusion entry: input_model, "
     "input_shape, precision, batch_size, batch_axis, max_tensor_size, convert_version, signature_name, passes, "
     "skip_passes, name"),
    ("model_fusion:\n" + ENTRY0 + ENTRY1 + "    output_dir: out\n",
     "config.yaml: model_fusion[1]: output_dir applies to the whole fused executable; set it at the top level of "
     "the file, not in a model_fusion entry"),
    ("exports_popef: true\nmodel_fusion:\n" + ENTRY0,
     "config.yaml: unknown key 'exports_popef'; valid keys: input_model, input_shape"),
    ("model_fusion:\n" + ENTRY0 + "  - input_model: nope.onnx\n",
     "config.yaml: model_fusion[1]: input_model 'nope.onnx' not found (looked for "),
    ("model_fusion:\n" + ENTRY0 + "    input_shape: ['X:1,2']\n",
     "config.yaml: model_fusion[0]: bad input_shape 'X:1,2': expected NAME=d0,d1,... (e.g. X=4,2)"),
    ("model_fusion:\n" + ENTRY0 + "    input_shape: ['X=1,2', 'X=1,2']\n",
     "config.yaml: model_fusion[0]: input_shape gives input 'X' twice"),
    ("model_fusion:\n" + ENTRY0 + ENTRY1 + "    precision: fp8\n",
     "config.yaml: model_fusion[1]: precision must be one of fp32, fp16, got 'fp8'"),
    ("model_fusion:\n" + ENTRY0 + "    batch_size: four\n",
     "config.yaml: model_fusion[0]: batch_size must be an integer, got 'four'"),
    ("export_popef: false\nmodel_fusion:\n" + ENTRY0,
     "config.yaml: export_popef is false, but model fusion produces only a PopEF file; set export_popef: true "
     "(or leave it out)"),
    ("model_fusion: []\n", "config.yaml: model_fusion is empty: list at least one model to fuse"),
    ("model_fusion:\n", "config.yaml: model_fusion must be a list of models (each a mapping with input_model, "
                        "input_shape, precision...), got NoneType"),
    ("model_fusion:\n  - model0.onnx\n",
     "config.yaml: model_fusion[0]: expected a mapping of settings (input_model: ..., input_shape: ...), got "
     "'model0.onnx'"),
    ("model_fusion:\n  - precision: fp16\n", "config.yaml: model_fusion[0]: input_model is required"),
    ("model_fusion:\n" + ENTRY0 + "    name: a\n" + ENTRY1 + "    name: a\n",
     "config.yaml: model_fusion[1]: name 'a' is already the name of model_fusion[0]; subgraph names must be unique"),
    ("model_fusion:\n" + ENTRY0 + ENTRY1 + "    name: graph0\n",
     "config.yaml: model_fusion[1]: name 'graph0' is already the name of model_fusion[0] (its default name); "
     "subgraph names must be unique"),
    ("model_fusion:\n" + ENTRY0 + "    name: 'a b'\n",
     "config.yaml: model_fusion[0]: name 'a b' is not a valid subgraph name"),
    ("input_model: model0.onnx\nmodel_fusion:\n" + ENTRY1,
     "config.yaml: input_model is given at the top level and model_fusion lists the models to fuse; put "
     "input_model in each model_fusion entry instead"),
])
def test_config_errors(workdir, yaml_text, expected):
    write(workdir, yaml_text)
    message = user_error(run_cli(["--config_yaml", "config.yaml"], cwd=str(workdir)))
    assert message.startswith(expected), message


def test_model_errors_name_the_entry_and_model(workdir):
    model = tutorial_model0()
    model.graph.output.append(model.graph.output[0])
    onnx.save(model, str(workdir / "dup_outputs.onnx"))
    write(workdir, "model_fusion:\n" + ENTRY0 + "  - input_model: dup_outputs.onnx\n")
    message = user_error(run_cli(["--config_yaml", "config.yaml"], cwd=str(workdir)))
    assert message == (f"config.yaml: model_fusion[1] ({workdir / 'dup_outputs.onnx'}): output 'O' is listed 2 times "
                       f"among the graph's outputs; each output becomes the anchor 'graph1/O', so output names must "
                       f"be unique within a model")
    write(workdir, "model_fusion:\n" + ENTRY0 + "    input_shape: ['Z=1,2']\n")
    message = user_error(run_cli(["--config_yaml", "config.yaml"], cwd=str(workdir)))
    assert message == (f"config.yaml: model_fusion[0] ({workdir / 'model0.onnx'}): --input_shape names 'Z', which is "
                       f"not an input of the model; its inputs are: X, Y")
    write(workdir, "model_fusion:\n  - input_model: mlp.onnx\n")  # dynamic batch, no batch_size
    message = user_error(run_cli(["--config_yaml", "config.yaml"], cwd=str(workdir)))
    assert message.startswith(f"config.yaml: model_fusion[0] ({workdir / 'mlp.onnx'}): graph input 'X' has shape "
                              f"[N, 8], which is not static")


def test_input_model_flag_with_a_fusion_config(workdir):
    write(workdir, TUTORIAL_YAML)
    message = user_error(run_cli(["--config_yaml", "config.yaml", "--input_model", "model0.onnx"], cwd=str(workdir)))
    assert message == ("--input_model cannot be combined with a model_fusion config; list every model to fuse under "
                       "model_fusion")
