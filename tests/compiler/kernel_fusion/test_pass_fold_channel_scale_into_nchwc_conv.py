"""fold_channel_scale_into_nchwc_conv: squeeze-and-excite's Mul(X, S) -> NchwcConv becomes the
NchwcConv's input scale. Each case runs the whole KERNEL_FUSION_PIPELINE on a small MBConv block
(to_nchwc_layout writes the blocked nodes first), checks which Muls were folded, that
onnx.checker and the lowering accept the result, and evaluates it with onnx's ReferenceEvaluator
plus the numpy references of the internal ops (tests/compiler/nchwc_reference_ops.py) against
onnxruntime on the original model."""
import numpy as np
import onnx
import pytest
from onnx import helper

from compiler.converter.pipeline import prepare_control_flow_body
from compiler.kernel_fusion import KERNEL_FUSION_PIPELINE, run_kernel_fusions
from compiler.kernel_fusion.passes.fold_channel_scale_into_nchwc_conv import F32_MIN_PIXELS_PER_OUTPUT
from compiler.lowering.lower_graph import lower_graph
from compiler.lowering.weights import WeightStore
from compiler.onnx_graph.tensor_types import write_type
from compiler.onnx_graph.type_inference import infer_types
from compiler_test_helpers import check_fused_against_onnxruntime, F16, F32, make_model


def mbconv(n=2, c=8, expanded=24, squeezed=4, hw=9, dtype=F32, gate_reader=None, constant_gate=False):
    """Expand 1x1 + swish -> depthwise 3x3 + swish -> SE (mean -> reduce 1x1 + swish -> expand
    1x1 + sigmoid) -> Mul -> project 1x1. gate_reader: "depthwise" (the scaled tensor is read by
    a depthwise conv instead of the project) or "output" (also a graph output)."""
    rng = np.random.default_rng(0)
    nodes, inits = [], {}

    def conv(x, cin, m, name, k=1, group=1, **attrs):
        inits[f"{name}_W"] = (rng.standard_normal((m, cin // group, k, k)) / np.sqrt(cin // group * k * k)
                              ).astype(np.float32)
        inits[f"{name}_B"] = (rng.standard_normal(m) * 0.1).astype(np.float32)
        nodes.append(helper.make_node("Conv", [x, f"{name}_W", f"{name}_B"], [name], name=name, kernel_shape=[k, k],
                                      group=group, **attrs))
        return name

    def swish(x):
        nodes.append(helper.make_node("Sigmoid", [x], [x + "_sig"]))
        nodes.append(helper.make_node("Mul", [x, x + "_sig"], [x + "_swish"]))
        return x + "_swish"

    e = swish(conv("X", c, expanded, "expand"))
    d = swish(conv(e, expanded, expanded, "depthwise", k=3, group=expanded, pads=[1, 1, 1, 1]))
    if constant_gate:
        inits["gate"] = rng.uniform(0.1, 1.0, (1, expanded, 1, 1)).astype(np.float32)
        gate = "gate"
    else:
        nodes.append(helper.make_node("GlobalAveragePool", [d], ["pooled"]))
        r = swish(conv("pooled", expanded, squeezed, "reduce"))
        gate = "gate"
        nodes.append(helper.make_node("Sigmoid", [conv(r, squeezed, expanded, "excite")], [gate]))
    nodes.append(helper.make_node("Mul", [d, gate], ["scaled"], name="excite_mul"))
    outputs = ["Y"]
    if gate_reader == "depthwise":
        conv("scaled", expanded, expanded, "Y", k=3, group=expanded, pads=[1, 1, 1, 1])
    else:
        conv("scaled", expanded, c, "Y")
    if gate_reader == "output":
        outputs.append("scaled")
    if dtype == F16:
        inits = {k: v.astype(np.float16) for k, v in inits.items()}
    model = make_model(nodes, [("X", dtype, [n, c, hw, hw])], [(o, dtype, None) for o in outputs], inits, opset=13)
    types = infer_types(model).types
    for out in model.graph.output:
        write_type(out, types[out.name])  # (onnx.checker wants its shape)
    return model


def fused(model):
    return run_kernel_fusions(model, "test.onnx")


def scaled_convs(model):
    return [n for n in model.graph.node if n.op_type == "NchwcConv" and len(n.input) == 5 and n.input[4]]


def test_the_excitation_mul_becomes_the_project_convs_input_scale():
    assert KERNEL_FUSION_PIPELINE.index("fold_channel_scale_into_nchwc_conv") > KERNEL_FUSION_PIPELINE.index(
        "to_nchwc_layout")
    model = mbconv()
    out = fused(model)
    assert not [n for n in out.graph.node if n.op_type == "Mul"]
    [project] = scaled_convs(out)
    assert project.name == "Y"
    made = {o: n for n in out.graph.node for o in n.output}
    assert made[project.input[0]].name == "depthwise" and made[project.input[4]].name == "excite"
    assert project.input[3] == ""  # no Sum
    check_fused_against_onnxruntime(model, out, 1e-4)


def test_float16_block_matches_onnxruntime_within_float16_tolerance():
    model = mbconv(n=1, dtype=F16)
    out = fused(model)
    assert len(scaled_convs(out)) == 1 and not [n for n in out.graph.node if n.op_type == "Mul"]
    check_fused_against_onnxruntime(model, out, 1e-2)


def test_float32_folds_where_the_pixels_repay_the_weight_copies():
    """H·W >= F32_MIN_PIXELS_PER_OUTPUT · M in float32 (here 4 pixels against 16 outputs: stays;
    25 against 16: folds); float16 folds every block."""
    assert 4 < F32_MIN_PIXELS_PER_OUTPUT * 16 <= 25
    model = mbconv(hw=2, c=16)
    out = fused(model)
    assert scaled_convs(out) == [] and [n.name for n in out.graph.node if n.op_type == "Mul"] == ["excite_mul"]
    check_fused_against_onnxruntime(model, out, 1e-4)
    assert len(scaled_convs(fused(mbconv(hw=2, c=16, dtype=F16)))) == 1
    assert len(scaled_convs(fused(mbconv(hw=5, c=16)))) == 1


@pytest.mark.parametrize("variant", ["depthwise", "output", "constant-gate"])
def test_muls_that_do_not_fit_stay(variant):
    model = mbconv(gate_reader=None if variant == "constant-gate" else variant, constant_gate=variant == "constant-gate")
    out = fused(model)
    assert scaled_convs(out) == [] and [n.name for n in out.graph.node if n.op_type == "Mul"] == ["excite_mul"]
    check_fused_against_onnxruntime(model, out, 1e-4)


def test_malformed_input_scale_fails_lowering_by_name():
    model = fused(mbconv())
    [project] = scaled_convs(model)
    project.input[4] = project.input[0]  # the full tensor, not [N, C/8, 1, 1, 8]
    with pytest.raises(Exception, match="Y.*input scale .* has shape .*expected \\[2, 3, 1, 1, 8\\]"):
        lower_graph(model, WeightStore(), "test.onnx", prepare_body=prepare_control_flow_body)
