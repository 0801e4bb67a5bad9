"""to_inverted_residual: expand 1x1 -> depthwise -> project 1x1 [+ residual] NchwcConv chains ->
NchwcInvertedResidual. Each case runs the whole KERNEL_FUSION_PIPELINE (to_nchwc_layout writes the
NchwcConvs first) under a policy, checks which blocks were rewritten, that onnx.checker and the
lowering accept the result, and evaluates it with onnx's ReferenceEvaluator plus the numpy
references of the internal ops (tests/compiler/nchwc_reference_ops.py) against onnxruntime on
the original model."""
import numpy as np
import onnx
import pytest
from onnx import helper

from compiler.converter.context import PassContext
from compiler.converter.pipeline import prepare_control_flow_body, run_passes
from compiler.errors import ConfigError
from compiler.kernel_fusion import KERNEL_FUSION_PIPELINE, run_kernel_fusions
from compiler.kernel_fusion.passes.to_inverted_residual import MIN_IMAGES
from compiler.lowering.lower_graph import lower_graph
from compiler.lowering.weights import WeightStore
from compiler.onnx_graph.tensor_types import write_type
from compiler.onnx_graph.type_inference import infer_types
from compiler.options import CompilerOptions
from compiler_test_helpers import F16, F32, make_model, ort_run, random_feeds
from nchwc_reference_ops import run_internal

OP = "NchwcInvertedResidual"


class Blocks:
    """A small MobileNetV2-like network, block by block; every conv gets random weights."""

    def __init__(self, seed=0):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.count = [], {}, 0

    def conv(self, x, c, m, k=1, group=1, bias=True, name=None, **attrs):
        self.count += 1
        name = name or f"conv{self.count}"
        self.inits[f"{name}_W"] = (self.rng.standard_normal((m, c // group, k, k)) / np.sqrt(c // group * k * k)
                                   ).astype(np.float32)
        inputs = [x, f"{name}_W"]
        if bias:
            self.inits[f"{name}_B"] = (self.rng.standard_normal(m) * 0.1).astype(np.float32)
            inputs.append(f"{name}_B")
        self.nodes.append(helper.make_node("Conv", inputs, [name], name=name, kernel_shape=[k, k], group=group,
                                           **attrs))
        return name

    def act(self, x, kind):
        out = f"{x}_{kind.lower()}"
        if kind == "Relu6":
            self.inits.setdefault("zero", np.array(0, np.float32))
            self.inits.setdefault("six", np.array(6, np.float32))
            self.nodes.append(helper.make_node("Clip", [x, "zero", "six"], [out]))
        elif kind == "Swish":  # as tf2onnx writes it: x·σ(x)
            self.nodes.append(helper.make_node("Sigmoid", [x], [f"{x}_sigmoid"]))
            self.nodes.append(helper.make_node("Mul", [x, f"{x}_sigmoid"], [out]))
        else:
            self.nodes.append(helper.make_node(kind, [x], [out]))
        return out

    def mbconv(self, x, c, t, m, stride, name, k=3, pads=None):
        """EfficientNet's MBConv: expand 1x1 + swish, depthwise kxk + swish, squeeze-and-excite
        (mean over the plane, reduce 1x1 + swish, excite 1x1 + sigmoid, D·S), project 1x1 [+ X]."""
        e = self.act(self.conv(x, c, c * t, name=f"{name}_expand"), "Swish")
        pads = pads if pads is not None else [k // 2] * 4
        d = self.act(self.conv(e, c * t, c * t, k=k, group=c * t, name=f"{name}_depthwise", strides=[stride, stride],
                               pads=pads), "Swish")
        self.nodes.append(helper.make_node("ReduceMean", [d], [f"{name}_mean"], axes=[2, 3], keepdims=1))
        r = self.act(self.conv(f"{name}_mean", c * t, max(1, c // 4), name=f"{name}_reduce"), "Swish")
        s = self.act(self.conv(r, max(1, c // 4), c * t, name=f"{name}_excite"), "Sigmoid")
        self.nodes.append(helper.make_node("Mul", [d, s], [f"{name}_scaled"]))
        p = self.conv(f"{name}_scaled", c * t, m, name=f"{name}_project")
        if stride == 1 and c == m:
            p = f"{name}_sum"
            self.nodes.append(helper.make_node("Add", [f"{name}_project", x], [p]))
        return p

    def block(self, x, c, t, m, stride, name, act="Relu6", project_bias=True, dilation=1):
        e = self.act(self.conv(x, c, c * t, name=f"{name}_expand"), act)
        pad = dilation
        d = self.act(self.conv(e, c * t, c * t, k=3, group=c * t, name=f"{name}_depthwise", strides=[stride, stride],
                               pads=[pad] * 4, dilations=[dilation, dilation]), act)
        p = self.conv(d, c * t, m, bias=project_bias, name=f"{name}_project")
        if stride == 1 and c == m:
            p = f"{name}_sum"
            self.nodes.append(helper.make_node("Add", [f"{name}_project", x], [p]))
        return p

    def model(self, x_shape, y, dtype=F32):
        inits = self.inits if dtype == F32 else {k: v.astype(np.float16) for k, v in self.inits.items()}
        model = make_model(self.nodes, [("X", dtype, list(x_shape))], [(y, dtype, None)], inits, opset=13)
        write_type(model.graph.output[0], infer_types(model).types[y])  # (onnx.checker wants its shape)
        return model


def mobilenet_like(n=2, hw=16, dtype=F32):
    """Stem 3x3/2, a stride-2 block, a residual block, a residual block without project bias and
    Relu activations, a 1x1 head."""
    net = Blocks()
    s = net.act(net.conv("X", 8, 16, k=3, name="stem", strides=[2, 2], pads=[1, 1, 1, 1]), "Relu6")
    a = net.block(s, 16, 6, 24, 2, "a")
    b = net.block(a, 24, 6, 24, 1, "b")
    c = net.block(b, 24, 4, 24, 1, "c", act="Relu", project_bias=False)
    net.conv(c, 24, 32, name="Y")
    return net.model((n, 8, hw, hw), "Y", dtype)


def efficientnet_like(n=2, hw=16, dtype=F32):
    """Stem 3x3/2 + swish, MBConv blocks: 3x3/2 with TF's SAME pads, 3x3/1 + X, 5x5/1, 5x5/2."""
    net = Blocks()
    s = net.act(net.conv("X", 8, 16, k=3, name="stem", strides=[2, 2], pads=[1, 1, 1, 1]), "Swish")
    a = net.mbconv(s, 16, 6, 24, 2, "a", pads=[0, 0, 1, 1])
    b = net.mbconv(a, 24, 6, 24, 1, "b")
    c = net.mbconv(b, 24, 6, 40, 1, "c", k=5)
    d = net.mbconv(c, 40, 6, 40, 2, "d", k=5, pads=[1, 1, 2, 2])
    net.conv(d, 40, 32, name="Y")
    return net.model((n, 8, hw, hw), "Y", dtype)


def fused(model, policy="all"):
    return run_kernel_fusions(model, "test.onnx", inverted_residual=policy)


def rewritten(model):
    return sorted(n.name for n in model.graph.node if n.op_type == OP)


def attrs_of(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def check(original, out, rtol=1e-4):
    onnx.checker.check_model(out)
    lower_graph(out, WeightStore(), "test.onnx", prepare_body=prepare_control_flow_body)
    feeds = random_feeds(original)
    want, got = ort_run(original, feeds)[0], run_internal(out, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * max(1.0, float(np.abs(want).max())))


def test_all_rewrites_every_block():
    model = mobilenet_like()
    out = fused(model)
    assert rewritten(out) == ["a_project", "b_project", "c_project"]
    assert not any(n.name.endswith(("_expand", "_depthwise")) for n in out.graph.node)
    nodes = {n.name: n for n in out.graph.node}
    a, b, c = nodes["a_project"], nodes["b_project"], nodes["c_project"]
    assert a.input[0].endswith("__nchwc") and len(a.input) == 7 and b.input[0] == a.output[0]
    assert attrs_of(a) == {"kernel_shape": [3, 3], "strides": [2, 2], "dilations": [1, 1], "pads": [1, 1, 1, 1],
                           "residual": 0, "expand_activation": b"Clip", "expand_activation_params": [0.0, 6.0],
                           "depthwise_activation": b"Clip", "depthwise_activation_params": [0.0, 6.0],
                           "project_activation": b""}
    assert attrs_of(b)["residual"] == 1 and attrs_of(c)["residual"] == 1
    assert attrs_of(c)["expand_activation"] == b"Relu" and attrs_of(c)["depthwise_activation"] == b"Relu"
    inits = {t.name: t for t in out.graph.initializer}
    zero_bias = inits[c.input[6]]  # the project without bias
    assert tuple(zero_bias.dims) == (24,) and not onnx.numpy_helper.to_array(zero_bias).any()
    check(model, out)


def test_off_keeps_the_three_steps():
    assert KERNEL_FUSION_PIPELINE[-1] == "to_inverted_residual"
    out = fused(mobilenet_like(), "off")
    assert rewritten(out) == [] and sum(n.op_type == "NchwcConv" for n in out.graph.node) == 11


def test_auto_fuses_the_measured_batches():
    assert rewritten(fused(mobilenet_like(n=1, hw=8), "auto")) == ["a_project", "b_project", "c_project"]
    assert rewritten(fused(mobilenet_like(n=2), "auto")) == []
    assert rewritten(fused(mobilenet_like(n=MIN_IMAGES - 1), "auto")) == []
    assert rewritten(fused(mobilenet_like(n=MIN_IMAGES, hw=8), "auto")) == ["a_project", "b_project", "c_project"]


def test_float16_block_matches_the_three_float16_steps():
    """The reference rounds E and D to float16 as both the three steps and the fused kernel store
    them: the fused model computes exactly what the unfused one does."""
    model = mobilenet_like(dtype=F16)
    out, three = fused(model), fused(model, "off")
    assert rewritten(out) == ["a_project", "b_project", "c_project"]
    lower_graph(out, WeightStore(), "test.onnx", prepare_body=prepare_control_flow_body)
    feeds = random_feeds(model)
    np.testing.assert_array_equal(run_internal(out, feeds)[0], run_internal(three, feeds)[0])


@pytest.mark.parametrize("variant", ["expand-output-read-twice", "dilated-depthwise", "tanh", "other-sum"])
def test_blocks_that_do_not_fit_stay_three_steps(variant):
    net = Blocks()
    s = net.conv("X", 8, 16, name="stem")
    if variant == "other-sum":  # the residual Add's other operand is not the block's input
        y = net.block(s, 16, 2, 16, 1, "a")
        add = net.nodes.pop()
        add.input[1] = net.conv("stem", 16, 16, name="side")
        net.nodes.append(add)
    elif variant == "expand-output-read-twice":
        y = net.block(s, 16, 2, 8, 1, "a")
        net.nodes.append(helper.make_node("ReduceMean", ["a_expand_relu6"], ["m"], axes=[1], keepdims=1))
        net.nodes.append(helper.make_node("Add", [y, "m"], ["y2"]))
        y = "y2"
    else:
        y = net.block(s, 16, 2, 16, 1, "a", **({"dilation": 2} if variant == "dilated-depthwise" else
                                              {"act": "Tanh"}))
    model = net.model((1, 8, 6, 6), y)
    out = fused(model)
    # the other Sum keeps the project apart; the expand -> depthwise pair still fuses
    assert rewritten(out) == (["a_depthwise"] if variant == "other-sum" else [])
    check(model, out)


def test_inverted_residual_option_is_checked():
    assert CompilerOptions().inverted_residual == "auto"
    assert CompilerOptions(inverted_residual="off").validate().to_dict()["inverted_residual"] == "off"
    with pytest.raises(ConfigError, match="CompilerOptions.inverted_residual must be one of auto, off, all, got 'on'"):
        CompilerOptions(inverted_residual="on").validate()


def test_malformed_node_fails_lowering_by_name():
    rng = np.random.default_rng(0)
    inits = {"We": rng.standard_normal((3, 1, 1, 1, 8, 16)).astype(np.float32),
             "Be": np.zeros(48, np.float32), "Wd": rng.standard_normal((6, 3, 3, 8)).astype(np.float32),
             "Bd": np.zeros(48, np.float32), "Wp": rng.standard_normal((1, 6, 1, 1, 8, 8)).astype(np.float32),
             "Bp": np.zeros(8, np.float32)}
    node = helper.make_node(OP, ["X", "We", "Be", "Wd", "Bd", "Wp", "Bp"], ["Y"], name="bad", domain="ai.tfpopef",
                            kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], residual=1)
    model = make_model([node], [("X", F32, [1, 1, 6, 6, 8])], [("Y", F32, [1, 1, 3, 3, 8])], inits)
    model.opset_import.append(helper.make_opsetid("ai.tfpopef", 1))
    with pytest.raises(Exception, match="bad.*residual = 1 adds X"):
        lower_graph(model, WeightStore(), "test.onnx", prepare_body=prepare_control_flow_body)
    bad = model.graph.node[0]
    del bad.attribute[:]
    bad.attribute.extend([helper.make_attribute("kernel_shape", [3, 3]), helper.make_attribute("pads", [1] * 4),
                          helper.make_attribute("strides", [2, 2]), helper.make_attribute("expand_activation", "Tanh")])
    with pytest.raises(Exception, match="bad.*expand_activation 'Tanh'"):
        lower_graph(model, WeightStore(), "test.onnx", prepare_body=prepare_control_flow_body)


def test_pass_alone_without_blocked_convs_is_a_no_op():
    model = mobilenet_like()
    out = run_passes(onnx.ModelProto.FromString(model.SerializeToString()), ["to_inverted_residual"],
                     PassContext(model_name="test.onnx", inverted_residual="all"))
    assert out.SerializeToString() == model.SerializeToString()


# --- expand -> depthwise pairs (no project stage) ---------------------------------------------------
def test_all_rewrites_every_mbconv_pair():
    """Squeeze-and-excite reads the depthwise's output, so each block's expand -> depthwise pair is
    fused without the project; the mean, the SE convs and the project (with the SE scale as its
    input scale) read the fused node's output."""
    model = efficientnet_like()
    out = fused(model)
    assert rewritten(out) == ["a_depthwise", "b_depthwise", "c_depthwise", "d_depthwise"]
    assert not any(n.name.endswith("_expand") for n in out.graph.node)
    nodes = {n.name: n for n in out.graph.node}
    a, d = nodes["a_depthwise"], nodes["d_depthwise"]
    assert len(a.input) == 5 and a.input[0] == nodes["stem"].output[0]
    assert attrs_of(a) == {"kernel_shape": [3, 3], "strides": [2, 2], "dilations": [1, 1], "pads": [0, 0, 1, 1],
                           "residual": 0, "expand_activation": b"Swish", "expand_activation_params": [1.0],
                           "depthwise_activation": b"Swish", "depthwise_activation_params": [1.0]}
    assert attrs_of(d)["kernel_shape"] == [5, 5] and attrs_of(d)["pads"] == [1, 1, 2, 2]
    readers = [n for n in out.graph.node if a.output[0] in n.input]
    # the project reads it directly (the SE scale folded in) or through the excitation Mul (float32
    # convolutions with few pixels per output channel keep it: fold_channel_scale_into_nchwc_conv)
    assert sorted(n.op_type for n in readers) in (["Mul", "ReduceMean"], ["NchwcConv", "ReduceMean"]), readers
    check(model, out)


def test_auto_fuses_pairs_at_the_measured_batches():
    from compiler.kernel_fusion.passes.to_inverted_residual import should_fuse_pair
    pairs = ["a_depthwise", "b_depthwise", "c_depthwise", "d_depthwise"]
    for n in (1, 2, MIN_IMAGES - 1, MIN_IMAGES):
        assert rewritten(fused(efficientnet_like(n=n, hw=8), "auto")) == (pairs if should_fuse_pair(n) else []), n
    assert rewritten(fused(efficientnet_like(n=1, hw=8), "off")) == []


def test_float16_pairs_match_the_float16_steps():
    model = efficientnet_like(dtype=F16)
    out, steps = fused(model), fused(model, "off")
    assert len(rewritten(out)) == 4
    lower_graph(out, WeightStore(), "test.onnx", prepare_body=prepare_control_flow_body)
    feeds = random_feeds(model)
    np.testing.assert_array_equal(run_internal(out, feeds)[0], run_internal(steps, feeds)[0])


def test_whole_block_is_preferred_to_the_pair():
    """A block without squeeze-and-excite but with swish fuses whole (7 inputs), not as a pair."""
    net = Blocks()
    s = net.conv("X", 8, 16, name="stem")
    y = net.block(s, 16, 4, 16, 1, "a", act="Swish")
    model = net.model((1, 8, 6, 6), y)
    out = fused(model)
    assert rewritten(out) == ["a_project"]
    assert len(next(n for n in out.graph.node if n.name == "a_project").input) == 7
    check(model, out)


@pytest.mark.parametrize("variant", ["expand-read-twice", "expand-with-sum", "expand-output-is-graph-output",
                                     "dilated-depthwise", "tanh"])
def test_pairs_that_do_not_fit_stay_two_steps(variant):
    net = Blocks()
    s = net.conv("X", 8, 16, name="stem")
    act = "Tanh" if variant == "tanh" else "Swish"
    e = net.act(net.conv(s, 16, 64, name="a_expand"), act)
    if variant == "expand-with-sum":  # the expand adds another tensor: fuse_epilogue makes it its Sum
        net.nodes.append(helper.make_node("Add", [e, net.conv(s, 16, 64, name="side")], ["e_sum"]))
        e = "e_sum"
    dilation = 2 if variant == "dilated-depthwise" else 1
    d = net.act(net.conv(e, 64, 64, k=3, group=64, name="a_depthwise", pads=[dilation] * 4,
                         dilations=[dilation, dilation]), act)
    net.nodes.append(helper.make_node("ReduceMean", [d], ["m"], axes=[2, 3], keepdims=1))
    net.nodes.append(helper.make_node("Mul", [d, "m"], ["y"]))
    y = "y"
    if variant == "expand-read-twice":
        net.nodes.append(helper.make_node("Add", ["y", e], ["y2"]))
        y = "y2"
    model = net.model((1, 8, 6, 6), y)
    if variant == "expand-output-is-graph-output":
        model.graph.output.append(helper.make_tensor_value_info(e, F32, None))
        write_type(model.graph.output[1], infer_types(model).types[e])
    out = fused(model)
    assert rewritten(out) == [], variant
    check(model, out)


def test_pair_without_project_inputs_is_checked_at_lowering():
    rng = np.random.default_rng(0)
    inits = {"We": rng.standard_normal((3, 1, 1, 1, 8, 16)).astype(np.float32), "Be": np.zeros(48, np.float32),
             "Wd": rng.standard_normal((6, 3, 3, 8)).astype(np.float32), "Bd": np.zeros(48, np.float32),
             "Bp": np.zeros(8, np.float32)}
    node = helper.make_node(OP, ["X", "We", "Be", "Wd", "Bd"], ["Y"], name="pair", domain="ai.tfpopef",
                            kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], residual=1)
    model = make_model([node], [("X", F32, [1, 1, 6, 6, 8])], [("Y", F32, [1, 6, 6, 6, 8])], inits)
    model.opset_import.append(helper.make_opsetid("ai.tfpopef", 1))
    with pytest.raises(Exception, match="pair.*residual = 1 needs the project stage"):
        lower_graph(model, WeightStore(), "test.onnx", prepare_body=prepare_control_flow_body)
    node = model.graph.node[0]
    node.input.append("Bp")  # six inputs: a project bias without weights
    attrs = [a for a in node.attribute if a.name != "residual"]
    del node.attribute[:]
    node.attribute.extend(attrs)
    with pytest.raises(Exception, match="pair.*expected X, We, Be, Wd, Bd and, for the project stage, both Wp and Bp"):
        lower_graph(model, WeightStore(), "test.onnx", prepare_body=prepare_control_flow_body)
