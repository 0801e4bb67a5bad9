"""Every bad fusion input through the Python API: a CompileError whose message names the entry
(model_fusion[i]) and the key or model problem."""
import numpy as np
import onnx
import pytest
from onnx import helper

from compiler import Compiler, CompilerOptions
from compiler.cli_config import FUSION_ENTRY_KEYS
from compiler.errors import CompileError, ConfigError, ConversionError, DeviceMemoryError, UnknownPassError
from compiler.fusion import FusionEntry, fuse_models
from compiler_test_helpers import F32, make_model
from fusion_test_models import mlp_model, tutorial_model0, tutorial_model1


def good(**overrides):
    return [dict(input_model=tutorial_model0(), precision="fp32"),
            {"input_model": tutorial_model1(), "precision": "fp16", **overrides}]


def test_entry_keys_match_the_yaml_keys():
    fields = [f for f in FusionEntry.__dataclass_fields__ if f != "where"]
    assert fields == list(FUSION_ENTRY_KEYS)


@pytest.mark.parametrize("entries, error, message", [
    ([], ConfigError, "model_fusion is empty: list at least one model to fuse"),
    ({"input_model": "m.onnx"}, ConfigError, "model_fusion must be a list of models, got dict"),
    ([42], ConfigError, "model_fusion[0]: expected a FusionEntry or a mapping of settings, got int"),
    (good(precison="fp16"), ConfigError,
     "model_fusion[1]: unknown key 'precison'; valid keys of a model_fusion entry: input_model, input_shape, "
     "precision,"),
    (good(precision="fp8"), ConfigError, "model_fusion[1]: precision 'fp8' is not one of fp32, fp16"),
    (good(input_shape=["X:1,1"]), ConfigError,
     "model_fusion[1]: bad input_shape 'X:1,1': expected NAME=d0,d1,... (e.g. X=4,2)"),
    (good(input_shape=42), ConfigError, "model_fusion[1]: input_shape must be a mapping NAME -> dims"),
    (good(input_shape={"X": "one"}), ConfigError, "model_fusion[1]: input_shape for 'X' must be a list"),
    (good(input_shape=["Z=1,1"]), ConversionError,
     "model_fusion[1] (<model 'graph'>): --input_shape names 'Z', which is not an input of the model; its inputs "
     "are: X"),
    (good(batch_size=0), ConfigError, "model_fusion[1]: batch_size must be a positive integer, got 0"),
    (good(passes=["constant_folding", "bogus"]), UnknownPassError, "model_fusion[1]: unknown pass 'bogus'"),
    (good(name="graph0"), ConfigError,
     "model_fusion[1]: name 'graph0' is already the name of model_fusion[0] (its default name); subgraph names "
     "must be unique"),
    (good(name="bad name"), ConfigError, "model_fusion[1]: name 'bad name' is not a valid subgraph name"),
    (good(name=""), ConfigError, "model_fusion[1]: name '' is not a valid subgraph name"),
    ([dict(input_model=None)], ConfigError, "model_fusion[0]: input_model is required"),
    ([dict(precision="fp16")], ConfigError, "model_fusion[0]: input_model is required"),
    (iter([7]), ConfigError, "model_fusion[0]: expected a FusionEntry or a mapping of settings, got int"),
    ("model.onnx", ConfigError, "model_fusion must be a list of models, got str"),
    ([dict(input_model=3.5)], ConfigError, "model_fusion[0]: input_model must be an ONNX file path, serialized model "
                                           "bytes or a ModelProto, got float"),
    ([dict(input_model=b"not onnx")], CompileError, "model_fusion[0] (<model bytes>): not a valid ONNX model"),
])
def test_bad_entries(entries, error, message):
    with pytest.raises(error) as info:
        fuse_models(entries)
    assert str(info.value).startswith(message), str(info.value)


def test_duplicate_explicit_names_and_missing_file(tmp_path):
    with pytest.raises(ConfigError) as info:
        fuse_models([dict(input_model=tutorial_model0(), name="a"), dict(input_model=tutorial_model1()),
                     dict(input_model=tutorial_model0(), name="a")])
    assert str(info.value) == ("model_fusion[2]: name 'a' is already the name of model_fusion[0]; subgraph names "
                               "must be unique")
    missing = str(tmp_path / "nope.onnx")
    with pytest.raises(ConfigError) as info:
        fuse_models([FusionEntry(tutorial_model0()), FusionEntry(missing)])
    assert str(info.value) == f"model_fusion[1]: input_model '{missing}' not found"


def test_duplicate_output_names_inside_one_model():
    model = tutorial_model0()
    model.graph.output.append(model.graph.output[0])
    with pytest.raises(ConversionError) as info:
        fuse_models([dict(input_model=tutorial_model1()), dict(input_model=model)])
    assert str(info.value) == ("model_fusion[1] (<model 'graph'>): output 'O' is listed 2 times among the graph's "
                               "outputs; each output becomes the anchor 'graph1/O', so output names must be unique "
                               "within a model")


def test_output_named_like_an_input_stream():
    model = make_model([helper.make_node("Relu", ["X"], ["stream0"])], [("X", F32, [1, 2])], [("stream0", F32, [1, 2])])
    with pytest.raises(ConversionError) as info:
        fuse_models([dict(input_model=model)])
    assert str(info.value) == ("model_fusion[0] (<model 'test'>): output 'stream0' would be the fused anchor "
                               "'graph0/stream0', which is already the fused name of input 'X' (inputs are named "
                               "graph0/stream<position>); rename the output in the model")


def test_model_errors_name_the_entry():
    erf = make_model([helper.make_node("Hardmax", ["X"], ["O"], name="erf")], [("X", F32, [2])], [("O", F32, [2])])
    with pytest.raises(CompileError) as info:
        fuse_models([dict(input_model=tutorial_model0()), dict(input_model=erf)])
    assert str(info.value).startswith("model_fusion[1] (<model 'test'>): unsupported op 'Hardmax' (node 'erf')")
    dynamic = mlp_model()
    with pytest.raises(CompileError) as info:
        fuse_models([dict(input_model=dynamic)])
    assert str(info.value).startswith("model_fusion[0] (<model 'graph'>): graph input 'X' has shape [N, 8], which is "
                                      "not static")


def test_device_memory_counts_deduplicated_weights_plus_the_largest_arena():
    shared = {"W0": np.ones((256, 256), np.float32)}  # 262,144 bytes, stored once
    entries = [dict(input_model=mlp_model(sizes=(256, 256, 4), seed=s, weights=shared), batch_size=b)
               for s, b in ((0, 1), (1, 64), (2, 2))]
    exe = fuse_models(entries)
    weights, arena = exe.weights_bytes, exe.arena_bytes
    assert weights < 2 * 262144
    # One byte short of what it needs: refused, naming the largest subgraph (batch 64).
    limit = CompilerOptions(device_memory_bytes=weights + arena - 1)
    with pytest.raises(DeviceMemoryError) as info:
        fuse_models(entries, limit)
    assert str(info.value) == (
        f"the fused executable of 3 model(s) needs {weights + arena:,} bytes of device memory (weights of all models, "
        f"deduplicated, {weights:,} + activations {arena:,} of the largest subgraph, model_fusion[1] (<model "
        f"'graph'>)) but the ipu2 device has {weights + arena - 1:,}; fuse fewer models, reduce batch sizes or input "
        f"shapes, or use precision fp16")
    fuse_models(entries, CompilerOptions(device_memory_bytes=weights + arena))  # exactly enough


def test_compiler_options_are_validated():
    with pytest.raises(ConfigError, match="ipu_version must be one of ipu2, ipu21, got 'ipu3'"):
        Compiler.compile_fused(good(), CompilerOptions(ipu_version="ipu3"))


def test_caller_entries_are_not_modified():
    model = tutorial_model0()
    before = model.SerializeToString()
    entry = FusionEntry(model, input_shape=["X=1,2", "Y=1,2"])
    raw = dict(input_model=tutorial_model1(), precision="fp16")
    fuse_models([entry, raw])
    assert entry.input_shape == ["X=1,2", "Y=1,2"] and entry.name is None and entry.where is None
    assert raw == dict(input_model=raw["input_model"], precision="fp16")
    assert model.SerializeToString() == before
    assert isinstance(onnx.load_from_string(before), onnx.ModelProto)
