"""TensorFlow front end: SavedModel folders and .keras files through --input_model (Python API,
CLI, YAML, YAML model fusion mixed with ONNX models), signature selection, opset, anchor names
= the signature's names, errors, and no TensorFlow import for ONNX-only use."""
import numpy as np
import onnx
import pytest
import yaml
from onnx import TensorProto, helper

from compiler import Compiler
from compiler.converter import Converter
from compiler.errors import ModelLoadError
from compiler.frontends import is_tensorflow_model, tensorflow_to_onnx
from tests.compiler.compiler_test_helpers import run_cli, run_python
from keras_checks import TOLERANCE, assert_close, run_on_emulator
from tf_popef_op.runtime import ModelRunner, RuntimeConfig

import keras  # noqa: E402  (pinned requirements; imported only by the TF tests)
import tensorflow as tf  # noqa: E402


def mlp():
    keras.utils.set_random_seed(1)
    inputs = keras.Input((16,), name="features")
    hidden = keras.layers.Dense(32, activation="relu", name="hidden")(inputs)
    return keras.Model(inputs, keras.layers.Dense(4, name="logits")(hidden))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tf_models")
    model = mlp()
    keras_path = str(folder / "mlp.keras")
    model.save(keras_path)
    saved_model = str(folder / "mlp_saved_model")
    model.export(saved_model, verbose=False)
    x = np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32)
    return {"keras": keras_path, "saved_model": saved_model, "x": x, "want": np.asarray(model(x)),
            "folder": folder}


def test_detection_is_by_path_only(models, tmp_path):
    assert is_tensorflow_model(models["keras"]) and is_tensorflow_model(models["saved_model"])
    assert not is_tensorflow_model(str(tmp_path)) and not is_tensorflow_model(b"bytes")


@pytest.mark.parametrize("kind", ["keras", "saved_model"])
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_tf_model_compiles_and_matches_keras(models, kind, precision):
    converted = Converter(batch_size=3, precision=precision).convert(models[kind])
    input_name = converted.graph.input[0].name
    result = run_on_emulator(converted, {input_name: models["x"]}, precision)
    assert_close(next(iter(result.values())), models["want"], TOLERANCE[precision])


def test_anchor_names_are_the_signature_names(models):
    keras_model = tensorflow_to_onnx(models["keras"])
    assert [i.name for i in keras_model.graph.input] == ["features"]
    assert [o.name for o in keras_model.graph.output] == ["logits"]
    saved = tensorflow_to_onnx(models["saved_model"])
    signature = tf.saved_model.load(models["saved_model"]).signatures["serving_default"]
    assert [i.name for i in saved.graph.input] == list(signature.structured_input_signature[1])
    assert [o.name for o in saved.graph.output] == list(signature.structured_outputs)


def test_python_api_compiles_a_savedmodel_folder_with_batch_size(models):
    from compiler import CompilerOptions
    executable = Compiler.compile(models["saved_model"], options=CompilerOptions(batch_size=3))
    runner = ModelRunner(executable, RuntimeConfig())
    out = runner.execute({"features": models["x"]})
    assert_close(next(iter(out.values())), models["want"], TOLERANCE["fp32"])


def test_default_opset_is_17_and_convert_version_chooses_another(models):
    assert tensorflow_to_onnx(models["keras"]).opset_import[0].version == 17
    converted = Converter(batch_size=1, convert_version=15).convert(models["keras"])
    assert {o.version for o in converted.opset_import if o.domain in ("", "ai.onnx")} == {15}


def two_signature_module(path):
    class Scale(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="v")])
        def double(self, v):
            return {"doubled": v * 2.0}

        @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32, name="v")])
        def triple(self, v):
            return {"tripled": v * 3.0}

    module = Scale()
    tf.saved_model.save(module, path, signatures={"double": module.double, "triple": module.triple})
    return path


def test_signature_name_selects_the_signature_and_its_names(tmp_path):
    path = two_signature_module(str(tmp_path / "scale"))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    model = Converter(batch_size=2, signature_name="triple").convert(path)
    assert [o.name for o in model.graph.output] == ["tripled"]
    np.testing.assert_allclose(run_on_emulator(model, {"v": x})["tripled"], 3 * x)
    with pytest.raises(ModelLoadError, match=r"no 'serving_default' signature and several others \(double, triple\)"):
        tensorflow_to_onnx(path)
    with pytest.raises(ModelLoadError, match=r"no signature 'quadruple'; the SavedModel's signatures are double, triple"):
        tensorflow_to_onnx(path, "quadruple")


def test_dynamic_batch_without_batch_size_is_a_clear_error(models):
    from compiler.errors import CompileError
    with pytest.raises(CompileError, match=r"graph input .features. has shape .*not static; set it with --input_shape features=.* or --batch_size"):
        Converter().convert(models["keras"])


def test_cli_compiles_and_runs_a_savedmodel(models, tmp_path):
    out = tmp_path / "out"
    r = run_cli(["--input_model", models["saved_model"], "--batch_size", "2", "--export_popef", "--output_dir",
                 str(out), "--run"])
    assert r.returncode == 0, r.stderr
    assert "features float32 [2, 16]" in r.stdout
    assert (out / "executable.popef").is_file()


def test_cli_unknown_signature_is_a_one_line_error(models, tmp_path):
    r = run_cli(["--input_model", models["saved_model"], "--batch_size", "2", "--signature_name", "nope",
                 "--output_dir", str(tmp_path)])
    assert r.returncode == 2
    assert "error:" in r.stderr and "no signature 'nope'" in r.stderr and "serving_default" in r.stderr


def test_yaml_input_model_and_fusion_mixing_onnx_and_tensorflow(models, tmp_path):
    add = helper.make_model(helper.make_graph(
        [helper.make_node("Add", ["A", "B"], ["S"])], "add",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 2]) for n in ("A", "B")],
        [helper.make_tensor_value_info("S", TensorProto.FLOAT, [2, 2])]), opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(add, str(tmp_path / "add.onnx"))
    single = tmp_path / "single.yaml"
    single.write_text(yaml.safe_dump({"input_model": models["keras"], "batch_size": 2, "export_popef": True,
                                      "output_dir": str(tmp_path / "single")}))
    r = run_cli(["--config_yaml", str(single)])
    assert r.returncode == 0, r.stderr
    fused = tmp_path / "fused.yaml"
    fused.write_text(yaml.safe_dump({"output_dir": str(tmp_path / "fused"), "model_fusion": [
        {"input_model": "add.onnx", "name": "adder"},
        {"input_model": models["saved_model"], "batch_size": 3, "precision": "fp16", "name": "mlp"}]}))
    r = run_cli(["--config_yaml", str(fused)])
    assert r.returncode == 0, r.stderr
    runner = ModelRunner(str(tmp_path / "fused" / "executable.popef"), RuntimeConfig())
    out = runner.execute({"index": np.array([1], np.int32), "graph1/features": models["x"].astype(np.float16)})
    assert_close(next(iter(out.values())).astype(np.float32), models["want"], TOLERANCE["fp16"])


def test_compiler_never_imports_tensorflow_for_onnx_models():
    r = run_python("import sys, compiler, compiler.cli, compiler.fusion; "
                   "print('tensorflow' in sys.modules, 'tf2onnx' in sys.modules)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False False"


def test_keras_model_with_dict_outputs_names_anchors_by_key(tmp_path):
    x = keras.Input((4,), name="x")
    model = keras.Model(x, {"zz": keras.layers.Dense(2)(x), "aa": keras.layers.Dense(3)(x)})
    path = str(tmp_path / "dict.keras")
    model.save(path)
    converted = Converter(batch_size=2).convert(path)
    feed = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    want = model(feed)
    got = run_on_emulator(converted, {"x": feed})
    assert sorted(got) == ["aa", "zz"]
    for key in ("aa", "zz"):
        assert_close(got[key], np.asarray(want[key]), TOLERANCE["fp32"], key)


def test_tensors_a_layer_captured_are_constants_not_inputs(tmp_path):
    # Normalization keeps a given mean and variance as plain tensors the exported function
    # captures (EfficientNet's and ConvNeXt's preprocessing): the model's only input is the image.
    images = keras.Input((4, 4, 3), name="images")
    normalized = keras.layers.Normalization(mean=[0.5, 0.25, -1.0], variance=[4.0, 0.25, 1.0])(images)
    model = keras.Model(images, keras.layers.Dense(2)(normalized))
    path = str(tmp_path / "normalized")
    model.export(path, verbose=False)
    exported = tensorflow_to_onnx(path)
    assert [i.name for i in exported.graph.input] == ["images"]
    feed = np.random.default_rng(0).standard_normal((2, 4, 4, 3)).astype(np.float32)
    got = run_on_emulator(Converter(batch_size=2).convert(exported), {"images": feed})
    assert_close(next(iter(got.values())), np.asarray(model(feed)), TOLERANCE["fp32"])
