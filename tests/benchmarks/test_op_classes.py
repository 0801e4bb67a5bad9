"""benchmarks/op_classes.py and op_profiles' name matching: the three runtimes' op names map to
common classes, convolutions by kind, and a class slower than the peer by more than the limit is
flagged only where it is a real share of the run."""
import os
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "benchmarks"))

from op_classes import compare, conv_kind, op_class  # noqa: E402
from op_profiles import AFFINE_CONV_SUFFIX, conv_kinds, kind_of_layer, kind_of_step  # noqa: E402


def test_conv_kinds_from_weight_shapes():
    assert conv_kind((64, 32, 1, 1)) == "1x1"
    assert conv_kind((64, 32, 3, 3)) == "3x3"
    assert conv_kind((96, 1, 5, 5)) == "depthwise 5x5"
    assert conv_kind((64, 3, 7, 7)) == "7x7"
    assert conv_kind((64, 1, 1, 1)) == "depthwise 1x1"  # a per-channel affine as a convolution


def test_our_steps_made_by_fusion_passes_have_a_kind():
    kinds = {"model/conv": "3x3"}
    assert kind_of_step("model/conv", kinds) == "3x3"
    assert kind_of_step("model/bn/add_1" + AFFINE_CONV_SUFFIX, kinds) == "depthwise 1x1"
    assert kind_of_step("model/other", kinds) is None


@pytest.mark.parametrize("op,conv,cls", [
    ("NchwcConv", "depthwise 3x3", "Conv depthwise 3x3"), ("FusedConv", "1x1", "Conv 1x1"),
    ("GroupConvolution", None, "Conv (kind unknown)"), ("FusedMatMul", None, "MatMul/Gemm"),
    ("FullyConnected", None, "MatMul/Gemm"), ("Subgraph", None, "Elementwise"), ("Eltwise", None, "Elementwise"),
    ("FusedElementwise", None, "Elementwise"), ("MVN", None, "Normalization"), ("ToNchwc", None, "Layout/copy"),
    ("ReorderOutput", None, "Layout/copy"), ("Concatenation", None, "Concat"), ("GlobalAveragePool", None,
                                                                                  "Pooling/reduce"),
    ("NchwcMaxPool", None, "Pooling/reduce"), ("NchwcAveragePool", None, "Pooling/reduce"),
    ("SomethingNew", None, "other: SomethingNew")])
def test_op_names_of_every_runtime_map_to_one_class(op, conv, cls):
    assert op_class(op, conv) == cls


def test_compare_flags_slow_classes_that_matter():
    ours = {"Conv 3x3": 800.0, "Elementwise": 150.0, "Softmax": 10.0, "Concat": 40.0}
    peers = {"onnxruntime": {"Conv 3x3": 400.0, "Elementwise": 140.0, "Softmax": 1.0, "Layout/copy": 5.0},
             "OpenVINO": {"Conv 3x3": 700.0, "Concat": 10.0, "Attention (fused)": 30.0}}
    rows = {r["class"]: r for r in compare(ours, peers, limit=1.5, min_share=0.02)}
    # largest of ours first, then what only the peers have, largest first
    assert list(rows) == ["Conv 3x3", "Elementwise", "Concat", "Softmax", "Attention (fused)", "Layout/copy"]
    assert rows["Attention (fused)"]["ours_us"] == 0.0 and rows["Attention (fused)"]["ratios"] == {}
    assert rows["Conv 3x3"]["flagged"] == ["onnxruntime"]                          # 2.0x; OpenVINO 1.14x
    assert rows["Conv 3x3"]["ratios"] == pytest.approx({"onnxruntime": 2.0, "OpenVINO": 800 / 700})
    assert rows["Elementwise"]["flagged"] == [] and "OpenVINO" not in rows["Elementwise"]["ratios"]  # fused there
    assert rows["Concat"]["flagged"] == ["OpenVINO"]                               # 4x, 4 % of the run
    assert rows["Softmax"]["flagged"] == []                                        # 10x, but 1 % of the run
    assert rows["Softmax"]["share"] == pytest.approx(0.01)


def test_openvino_layers_are_traced_to_their_onnx_conv():
    w = numpy_helper.from_array(np.zeros((8, 1, 5, 5), np.float32), "W")
    s = numpy_helper.from_array(np.ones((1, 8, 1, 1), np.float32), "S")
    graph = helper.make_graph([helper.make_node("Conv", ["X", "W"], ["conv_out"], name="model/dw/Conv", group=8),
                               helper.make_node("Mul", ["conv_out", "S"], ["bn_out"], name="model/bn/mul_1"),
                               helper.make_node("Relu", ["bn_out"], ["Y"], name="model/relu")], "g",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 8, 9, 9])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], [w, s])
    kinds = conv_kinds(helper.make_model(graph))
    assert kind_of_layer("model/dw/Conv/WithoutBiases", kinds) == "depthwise 5x5"
    assert kind_of_layer("conv_out", kinds) == "depthwise 5x5"
    assert kind_of_layer("model/bn/mul_1", kinds) == "depthwise 5x5"   # named after the BatchNorm it fused
    assert kind_of_layer("model/relu", kinds) == "depthwise 5x5"
    assert kind_of_layer("model/other", kinds) is None


def test_a_winograd_step_is_a_3x3_convolution_whatever_its_transformed_weight_shape():
    w = numpy_helper.from_array(np.zeros((36, 2, 2, 8, 8), np.float32), "U")
    graph = helper.make_graph([helper.make_node("NchwcWinogradConv", ["X", "U"], ["Y"], name="conv", domain="ai.tfpopef")],
                              "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], [w])
    assert conv_kinds(helper.make_model(graph))["conv"] == "3x3"
