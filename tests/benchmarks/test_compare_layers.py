"""benchmarks/compare_layers.py lines up our per-step profile with onnxruntime's per-node one:
checked on a small conv network run by both profilers for real (onnxruntime renames the Conv +
Clip and Conv + Add + Relu it fuses in its NCHWc layout after their last node), and on the
tracing rule alone."""
import os
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "benchmarks"))

from compare_layers import compare_model, format_report, onnx_node_resolver  # noqa: E402


def _conv_network():
    rng = np.random.default_rng(0)
    w = lambda name, shape: numpy_helper.from_array((rng.standard_normal(shape) * 0.1).astype(np.float32), name)
    nodes = [
        helper.make_node("Conv", ["X", "W1", "B1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["c1", "lo", "hi"], ["a1"], name="relu6"),
        helper.make_node("Conv", ["a1", "W2", "B2"], ["c2"], name="conv2"),
        helper.make_node("Add", ["c2", "a1"], ["s"], name="residual"),
        helper.make_node("Relu", ["s"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["Y"], name="pool"),
    ]
    inits = [w("W1", (16, 16, 3, 3)), w("B1", (16,)), w("W2", (16, 16, 1, 1)), w("B2", (16,)),
             numpy_helper.from_array(np.array(0, np.float32), "lo"), numpy_helper.from_array(np.array(6, np.float32), "hi")]
    graph = helper.make_graph(nodes, "convs", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 16, 28, 28])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 16, 1, 1])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("level", ["all", "extended"])
def test_every_conv_is_matched_with_its_onnxruntime_node(level):
    from compiler import Compiler
    model = _conv_network()
    report = compare_model(model, Compiler.compile(model.SerializeToString()), batch=1, ort_level=level, iters=3,
                           warmup=1)
    rows = {r["node"]: r for r in report["rows"]}
    # Our steps: NchwcWinogradConv conv1 (3x3, +Clip), NchwcConv conv2 (+Add +Relu), the pool
    # (blocked layout, the default; FusedConv without it).
    assert {"conv1", "conv2", "pool"} <= set(rows), report
    for name, op in (("conv1", "NchwcWinogradConv"), ("conv2", "NchwcConv")):
        assert rows[name]["ours_op"] == op
        # NCHWc: its Conv with the activation inside; plain NCHW: its own FusedConv (com.microsoft)
        assert set(rows[name]["ort_op"].split("+")) & {"Conv", "FusedConv"}, rows[name]
        assert rows[name]["ours_us"] > 0 and rows[name]["ort_us"] > 0
    # What we run on our own is the layout conversion at the edges (onnxruntime's Reorder*).
    assert {r["op"] for r in report["ours_only"]} <= {"ToNchwc", "FromNchwc"}, report["ours_only"]
    # Whatever onnxruntime runs on its own is a layout reorder or an op it did not fuse.
    assert {r["op"] for r in report["ort_only"]} <= {"ReorderInput", "ReorderOutput", "Clip", "Add", "Relu"}
    text = format_report(report)
    assert "conv1" in text and "total per run" in text


def test_an_nchwc_node_named_after_its_fused_activation_traces_back_to_the_conv():
    model = _conv_network()
    onnx_node_of = onnx_node_resolver(model, {"conv1", "conv2", "pool"})
    assert onnx_node_of("conv1") == "conv1"
    assert onnx_node_of("a1_nchwc") == "conv1"   # Conv + Clip, named after the Clip's output
    assert onnx_node_of("r_nchwc") == "conv2"    # Conv + Add + Relu
    assert onnx_node_of("ReorderOutput") == ""    # onnxruntime's own
    assert onnx_node_resolver(model, set())("relu6") == "relu6"      # nothing of ours above it: the node itself
