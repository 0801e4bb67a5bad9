import numpy as np
import onnx
import pytest
from onnx import helper

from compiler.converter import DEFAULT_PIPELINE, Converter
from compiler.errors import ConfigError, ConversionError, ModelLoadError
from compiler_test_helpers import F16, F32, assert_same_outputs, make_model, op_types, random_feeds


def _exported_style_model(opset=11, ir_version=None, batch="N"):
    """What exporters produce: dynamic batch, Constant nodes, a Shape->Reshape flatten, an
    Identity, initializers also listed as inputs (old exporters)."""
    rng = np.random.default_rng(1)
    nodes = [helper.make_node("Identity", ["X"], ["x_id"]),
             helper.make_node("Shape", ["x_id"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
             helper.make_node("Unsqueeze", ["b"], ["bu"], axes=[0]) if opset < 13 else
             helper.make_node("Unsqueeze", ["b", "zero1"], ["bu"]),
             helper.make_node("Concat", ["bu", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x_id", "target"], ["flat"]),
             helper.make_node("Gemm", ["flat", "W", "B"], ["g"], transB=1),
             helper.make_node("Relu", ["g"], ["r"]),
             helper.make_node("Softmax", ["r"], ["Y"], axis=1)]
    inits = {"W": rng.standard_normal((5, 12)).astype(np.float32), "B": rng.standard_normal(5).astype(np.float32),
             "zero": np.array(0, np.int64), "minus1": np.array([-1], np.int64), "zero1": np.array([0], np.int64)}
    inputs = [("X", F32, [batch, 3, 4])]
    if ir_version is not None and ir_version < 4:
        inputs += [(k, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)) for k, v in inits.items()]
    return make_model(nodes, inputs, [("Y", F32, [batch, 5])], inits, opset=opset, ir_version=ir_version)


@pytest.mark.parametrize("opset, ir_version", [(11, 3), (11, 6), (13, 7), (13, None), (17, None)])
def test_default_pipeline_on_exported_models_of_any_ir_version(opset, ir_version):
    model = _exported_style_model(opset, ir_version)
    conv = Converter(batch_size=2)
    out = conv.convert(model)
    assert conv.passes_run == DEFAULT_PIPELINE
    assert op_types(out) == ["Reshape", "Gemm", "Relu", "Softmax"]
    assert [i.name for i in out.graph.input] == ["X"]  # initializers are never anchors
    assert [d.dim_value for d in out.graph.output[0].type.tensor_type.shape.dim] == [2, 5]
    static = _exported_style_model(opset, ir_version, batch=2)
    assert_same_outputs(static, out, random_feeds(static), rtol=1e-5, atol=1e-6)
    assert all(n.name for n in out.graph.node)  # every node named, for errors and the program


def test_input_shape_and_precision_kwargs():
    model = _exported_style_model(13)
    out = Converter(input_shape={"X": [3, 3, 4]}, precision="fp16").convert(model)
    assert out.graph.input[0].type.tensor_type.elem_type == F16
    assert [d.dim_value for d in out.graph.input[0].type.tensor_type.shape.dim] == [3, 3, 4]
    static = _exported_style_model(13, batch=3)
    feeds = random_feeds(static)
    assert_same_outputs(static, out, feeds, rtol=2e-2, atol=2e-3, after_feeds={"X": feeds["X"].astype(np.float16)})


def test_accepts_bytes_paths_and_does_not_modify_the_callers_model(tmp_path):
    model = _exported_style_model(13, batch=2)
    snapshot = model.SerializeToString()
    from_proto = Converter().convert(model)
    assert model.SerializeToString() == snapshot
    from_bytes = Converter().convert(snapshot)
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    from_path = Converter().convert(str(path))
    assert op_types(from_proto) == op_types(from_bytes) == op_types(from_path)


def test_convert_version_converts_the_opset():
    model = make_model([helper.make_node("Relu", ["X"], ["O"])], [("X", F32, [2])], [("O", F32, [2])], opset=11)
    out = Converter(convert_version=13).convert(model)
    assert [(o.domain, o.version) for o in out.opset_import] == [("", 13)]


def test_bad_options_are_reported_at_construction():
    with pytest.raises(ConfigError, match="precision must be one of fp32, fp16, got 'fp8'"):
        Converter(precision="fp8")
    with pytest.raises(ConfigError, match="batch_size must be a positive integer"):
        Converter(batch_size=0)
    with pytest.raises(ConfigError, match="input_shape for 'X' must be a list"):
        Converter(input_shape={"X": "1,2"})
    with pytest.raises(ConfigError, match="max_tensor_size"):
        Converter(max_tensor_size=-5)


def test_unreadable_models_are_clear_errors(tmp_path):
    with pytest.raises(ModelLoadError, match="missing.onnx: file not found"):
        Converter().convert(str(tmp_path / "missing.onnx"))
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\xff\x00 definitely not protobuf")
    with pytest.raises(ModelLoadError, match="bad.onnx: not a valid ONNX model"):
        Converter().convert(str(bad))
    with pytest.raises(ModelLoadError, match="expected an ONNX ModelProto"):
        Converter().convert(12)


def test_dynamic_model_without_batch_size_fails_naming_the_input():
    with pytest.raises(ConversionError, match="graph input 'X' has shape \\[N, 3, 4\\]"):
        Converter().convert(_exported_style_model(13))
