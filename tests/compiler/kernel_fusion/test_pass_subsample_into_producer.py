"""subsample_into_producer: a stride-1 NchwcConv whose output is read only through a subsample
(a 1x1-window subsample step, or a strided 1x1 NchwcConv) computes only the subsampled pixels
(strided), its Sum read through a subsample of its own: at ResNet's stage boundary the last
block's expanding 1x1 and then its 3x3 (which its expanding 1x1 then reads at stride 1). Each case runs the whole KERNEL_FUSION_PIPELINE on an identity block
followed by a projection block (ResNet's stage boundary; share_strided_subsample writes the
subsample step first), checks the graph's shape, that onnx.checker and the lowering accept it,
and evaluates it with onnx's ReferenceEvaluator plus the numpy references of the internal ops
(tests/compiler/nchwc_reference_ops.py) against onnxruntime on the original model."""
import numpy as np
import pytest
from onnx import helper

from compiler.kernel_fusion import KERNEL_FUSION_PIPELINE, run_kernel_fusions
from compiler.onnx_graph.tensor_types import write_type
from compiler.onnx_graph.type_inference import infer_types
from compiler_test_helpers import check_fused_against_onnxruntime, conv_named, F16, F32, make_model, strides


def stage_boundary(n=2, hw=14, dtype=F32, residual=True, extra_reader=False, k_b=3):
    """Stem 3x3 (8 -> 16) + Relu = X; identity block: 1x1 (16 -> 8) + Relu -> 3x3 (8 -> 8) + Relu
    -> 1x1 (8 -> 16) "c" (+ X, Relu with `residual`; else c's own Relu) = Z; projection block
    on Z: 1x1/2 (16 -> 8) + Relu -> 1x1 (8 -> 32) + 1x1/2 shortcut (16 -> 32) on Z, Relu = Y.
    With extra_reader, Z is a second graph output too; k_b: the middle convolution's window."""
    rng = np.random.default_rng(0)
    nodes, inits = [], {}

    def conv(x, cin, m, name, k=1, stride=1, relu=True):
        inits[f"{name}_W"] = (rng.standard_normal((m, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float32)
        inits[f"{name}_B"] = (rng.standard_normal(m) * 0.1).astype(np.float32)
        out = f"{name}_conv" if relu else name
        nodes.append(helper.make_node("Conv", [x, f"{name}_W", f"{name}_B"], [out], name=name, kernel_shape=[k, k],
                                      strides=[stride, stride], pads=[k // 2] * 4))
        if relu:
            nodes.append(helper.make_node("Relu", [out], [name]))
        return name

    x = conv("X", 8, 16, "stem", k=3)
    a = conv(x, 16, 8, "a")
    b = conv(a, 8, 8, "b", k=k_b)
    if residual:
        c = conv(b, 8, 16, "c", relu=False)
        nodes.append(helper.make_node("Add", [c, x], ["z_sum"]))
        nodes.append(helper.make_node("Relu", ["z_sum"], ["Z"]))
        z = "Z"
    else:
        z = conv(b, 8, 16, "c")
    p = conv(z, 16, 8, "p", stride=2)
    q = conv(p, 8, 32, "q", relu=False)
    s = conv(z, 16, 32, "s", stride=2, relu=False)
    nodes.append(helper.make_node("Add", [q, s], ["y_sum"]))
    nodes.append(helper.make_node("Relu", ["y_sum"], ["Y"]))
    if dtype == F16:
        inits = {k: v.astype(np.float16) for k, v in inits.items()}
    outputs = [("Y", dtype, None)] + ([("Z", dtype, None)] if extra_reader else [])
    model = make_model(nodes, [("X", dtype, [n, 8, hw, hw])], outputs, inits, opset=13)
    types = infer_types(model).types
    for out in model.graph.output:  # (onnx.checker wants their shapes)
        write_type(out, types[out.name])
    return model


def fused(model):
    return run_kernel_fusions(model, "test.onnx")


def pools(model):
    return [n for n in model.graph.node if n.op_type == "NchwcMaxPool"]


def test_the_3x3_computes_only_the_subsampled_pixels():
    assert (KERNEL_FUSION_PIPELINE.index("share_strided_subsample")
            < KERNEL_FUSION_PIPELINE.index("subsample_into_producer")
            < KERNEL_FUSION_PIPELINE.index("to_winograd_conv"))
    model = stage_boundary()
    out = fused(model)
    b, c, p, s = (conv_named(out, name) for name in ("b", "c", "p", "s"))
    [stem] = [n for n in out.graph.node if n.name == "stem"]
    assert strides(b) == [2, 2] and strides(c) == strides(p) == strides(s) == [1, 1]
    assert c.input[0] == b.output[0]
    assert p.input[0] == s.input[0] == c.output[0]
    # the one pool left subsamples the residual (the stem's output) for c's Sum, right before c
    [step] = pools(out)
    assert {a.name: list(a.ints) for a in step.attribute} == {
        "kernel_shape": [1, 1], "strides": [2, 2], "dilations": [1, 1], "pads": [0, 0, 0, 0]}
    assert step.input[0] == stem.output[0] and c.input[3] == step.output[0]
    order = [n.name for n in out.graph.node]
    assert order.index(step.name) == order.index("c") - 1
    types = infer_types(out).types
    assert list(types[b.output[0]].shape) == [2, 1, 7, 7, 8] and list(types[c.output[0]].shape) == [2, 2, 7, 7, 8]
    check_fused_against_onnxruntime(model, out, 1e-4)


@pytest.mark.parametrize("hw", [13, 28])
def test_odd_and_wide_planes(hw):
    """An odd plane (the last row and column are read, 13 -> 7) and rows of 14 outputs."""
    model = stage_boundary(n=1, hw=hw)
    out = fused(model)
    assert strides(conv_named(out, "b")) == [2, 2] and strides(conv_named(out, "c")) == [1, 1]
    check_fused_against_onnxruntime(model, out, 1e-4)


def test_without_a_residual_no_pool_is_left():
    model = stage_boundary(residual=False)
    out = fused(model)
    assert pools(out) == [] and strides(conv_named(out, "b")) == [2, 2]
    check_fused_against_onnxruntime(model, out, 1e-4)


def test_float16_matches_onnxruntime_within_float16_tolerance():
    model = stage_boundary(n=1, dtype=F16)
    out = fused(model)
    assert strides(conv_named(out, "b")) == [2, 2]
    check_fused_against_onnxruntime(model, out, 1e-2)


def test_an_output_read_at_full_size_stays():
    """Z is also a graph output: every pixel of it is needed, so c keeps stride 1 and the
    projection block reads share_strided_subsample's step."""
    model = stage_boundary(extra_reader=True)
    out = fused(model)
    assert strides(conv_named(out, "c")) == [1, 1]  # (b stays stride 1: Winograd)
    [step] = pools(out)
    assert conv_named(out, "p").input[0] == step.output[0]
    check_fused_against_onnxruntime(model, out, 1e-4)


def test_the_strides_move_up_a_chain_of_1x1_layers():
    """With a 1x1 "b": c takes the subsample step's strides, b takes them from c, then a from b
    (whose input, the stem's output, has other readers): a computes the subsampled pixels."""
    model = stage_boundary(k_b=1)
    out = fused(model)
    a, b, c = (conv_named(out, name) for name in ("a", "b", "c"))
    assert strides(a) == [2, 2] and strides(b) == strides(c) == [1, 1]
    check_fused_against_onnxruntime(model, out, 1e-4)
