"""share_strided_subsample: strided 1x1 NchwcConvs reading the same blocked X read one subsample
step (an NchwcMaxPool with a 1x1 window) as stride-1 convolutions. Each case runs the whole
KERNEL_FUSION_PIPELINE on a ResNet projection block (to_nchwc_layout writes the blocked nodes
first), checks the graph's shape, that onnx.checker and the lowering accept it, and evaluates
it with onnx's ReferenceEvaluator plus the numpy references of the internal ops
(tests/compiler/nchwc_reference_ops.py) against onnxruntime on the original model."""
import numpy as np
import onnx
import pytest
from onnx import helper

from compiler.kernel_fusion import KERNEL_FUSION_PIPELINE, run_kernel_fusions
from compiler.onnx_graph.tensor_types import write_type
from compiler.onnx_graph.type_inference import infer_types
from compiler_test_helpers import check_fused_against_onnxruntime, conv_named, F16, F32, make_model, strides


def projection_block(n=2, hw=14, dtype=F32, k_a=1, one_reader=False):
    """Stem 3x3 (8 -> 16) + Relu = X; a = k_a x k_a/2 (16 -> 8) + Relu -> 3x3 (8 -> 8) + Relu ->
    1x1 (8 -> 32) = c; s = 1x1/2 (16 -> 32) on X; Y = Relu(c + s). With one_reader, s is a 1x1
    stride-1 conv of a's output instead (X has one strided reader)."""
    rng = np.random.default_rng(0)
    nodes, inits = [], {}

    def conv(x, cin, m, name, k=1, stride=1, pads=0, relu=True):
        inits[f"{name}_W"] = (rng.standard_normal((m, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float32)
        inits[f"{name}_B"] = (rng.standard_normal(m) * 0.1).astype(np.float32)
        out = f"{name}_conv" if relu else name
        nodes.append(helper.make_node("Conv", [x, f"{name}_W", f"{name}_B"], [out], name=name, kernel_shape=[k, k],
                                      strides=[stride, stride], pads=[pads] * 4))
        if relu:
            nodes.append(helper.make_node("Relu", [out], [name]))
        return name

    x = conv("X", 8, 16, "stem", k=3, pads=1)
    a = conv(x, 16, 8, "a", k=k_a, stride=2, pads=k_a // 2)
    b = conv(a, 8, 8, "b", k=3, pads=1)
    c = conv(b, 8, 32, "c", relu=False)
    s = conv(a if one_reader else x, 8 if one_reader else 16, 32, "s", stride=1 if one_reader else 2, relu=False)
    nodes.append(helper.make_node("Add", [c, s], ["sum"]))
    nodes.append(helper.make_node("Relu", ["sum"], ["Y"]))
    if dtype == F16:
        inits = {k: v.astype(np.float16) for k, v in inits.items()}
    model = make_model(nodes, [("X", dtype, [n, 8, hw, hw])], [("Y", dtype, None)], inits, opset=13)
    types = infer_types(model).types
    write_type(model.graph.output[0], types["Y"])  # (onnx.checker wants its shape)
    return model


def fused(model):
    return run_kernel_fusions(model, "test.onnx")


def subsample_steps(model):
    return [n for n in model.graph.node if n.op_type == "NchwcMaxPool"]


def test_both_strided_convs_read_one_subsample_as_stride_1():
    assert (KERNEL_FUSION_PIPELINE.index("to_nchwc_layout") < KERNEL_FUSION_PIPELINE.index("share_strided_subsample")
            < KERNEL_FUSION_PIPELINE.index("to_winograd_conv"))
    model = projection_block()
    out = fused(model)
    [step] = subsample_steps(out)
    attrs = {a.name: list(a.ints) for a in step.attribute}
    assert attrs == {"kernel_shape": [1, 1], "strides": [2, 2], "dilations": [1, 1], "pads": [0, 0, 0, 0]}
    made = {o: n for n in out.graph.node for o in n.output}
    assert made[step.input[0]].name == "stem"
    a, s = conv_named(out, "a"), conv_named(out, "s")
    assert a.input[0] == s.input[0] == step.output[0]
    assert strides(a) == strides(s) == [1, 1]
    order = [n.name for n in out.graph.node]
    assert order.index(step.name) < min(order.index("a"), order.index("s"))
    check_fused_against_onnxruntime(model, out, 1e-4)


@pytest.mark.parametrize("hw", [13, 28])
def test_odd_and_wide_planes(hw):
    """An odd plane (the last row and column are read, 13 -> 7) and rows of 14 outputs."""
    model = projection_block(n=1, hw=hw)
    out = fused(model)
    assert len(subsample_steps(out)) == 1
    check_fused_against_onnxruntime(model, out, 1e-4)


def test_float16_block_matches_onnxruntime_within_float16_tolerance():
    model = projection_block(n=1, dtype=F16)
    out = fused(model)
    assert len(subsample_steps(out)) == 1 and strides(conv_named(out, "s")) == [1, 1]
    check_fused_against_onnxruntime(model, out, 1e-2)


@pytest.mark.parametrize("variant", ["one reader", "3x3 reader"])
def test_readers_that_do_not_share_a_subsample_stay(variant):
    """One strided 1x1 reader, or a strided 1x1 and a strided 3x3 (which reads the rows
    between): no subsample step. The one reader's strides move into the stem, X's producer, which
    it alone reads (subsample_into_producer, after this pass)."""
    model = projection_block(one_reader=variant == "one reader", k_a=3 if variant == "3x3 reader" else 1)
    out = fused(model)
    assert subsample_steps(out) == []
    if variant == "one reader":
        assert strides(conv_named(out, "stem")) == [2, 2] and strides(conv_named(out, "a")) == [1, 1]
    else:
        assert strides(conv_named(out, "s")) == [2, 2]
    check_fused_against_onnxruntime(model, out, 1e-4)

