"""to_nchwc_layout: conv chains in the blocked NCHW8c layout. Each case builds a small model,
rewrites it (the pass alone on plain Conv nodes, or the whole KERNEL_FUSION_PIPELINE so that
FusedConv / FusedElementwise reach it), checks which ops it has (how many conversions, what
stays NCHW), that onnx.checker accepts it, that every tensor keeps a static shape and that the
lowering takes it, then evaluates it with onnx's ReferenceEvaluator plus numpy references of
the internal ops (tests/compiler/nchwc_reference_ops.py) and compares with onnxruntime on the
original model."""
import collections

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from compiler.converter.pipeline import prepare_control_flow_body
from compiler.kernel_fusion import KERNEL_FUSION_PIPELINE, run_kernel_fusions
from compiler.lowering.lower_graph import lower_graph
from compiler.lowering.weights import WeightStore
from compiler.onnx_graph.internal_ops import DOMAIN
from compiler.onnx_graph.tensor_types import write_type
from compiler.onnx_graph.type_inference import infer_types
from compiler_test_helpers import F16, F32, make_model, op_types, ort_run, random_feeds, run_pass
from nchwc_reference_ops import run_internal

PASS = "to_nchwc_layout"


class Net:
    """Builds a model node by node; every conv gets its own random weights (and bias)."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.count = [], {}, 0

    def _name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def conv(self, x, c, m, k=1, bias=True, group=1, out=None, weights=None, **attrs):
        name = out or self._name("conv")
        w = weights or f"{name}_W"
        if weights is None:
            scale = 1.0 / np.sqrt(c // group * k * k)
            self.inits[w] = (self.rng.standard_normal((m, c // group, k, k)) * scale).astype(np.float32)
        inputs = [x, w]
        if bias:
            self.inits[f"{name}_B"] = self.rng.standard_normal(m).astype(np.float32)
            inputs.append(f"{name}_B")
        self.nodes.append(helper.make_node("Conv", inputs, [name], name=name, group=group, **attrs))
        return name

    def op(self, op_type, inputs, out=None, **attrs):
        name = out or self._name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [name], name=name, **attrs))
        return name

    def const(self, value, dtype=np.float32):
        name = self._name("const")
        self.inits[name] = np.asarray(value, dtype)
        return name

    def relu6(self, x, out=None):
        return self.op("Clip", [x, self.const(0.0), self.const(6.0)], out=out)

    def model(self, inputs, outputs, opset=13):
        return typed_outputs(make_model(self.nodes, inputs, [(o, F32, None) for o in outputs], self.inits,
                                        opset=opset))


def typed_outputs(model):
    """The graph outputs declared with their inferred types (onnx.checker wants their shapes)."""
    types = infer_types(model).types
    for out in model.graph.output:
        write_type(out, types[out.name])
    return model


def counts(model):
    return collections.Counter(op_types(model))


def check(original, rewritten, feeds=None, ort_optimize=True):
    """Valid ONNX with static shapes everywhere, lowerable, and numerically the original
    (onnxruntime with its graph optimizations, unless ort_optimize=False)."""
    onnx.checker.check_model(rewritten)
    types = infer_types(rewritten, strict=True).types
    for node in rewritten.graph.node:
        for out in node.output:
            assert types[out].is_static, (node.op_type, out, types[out])
    lower_graph(rewritten, WeightStore(), "test.onnx", prepare_body=prepare_control_flow_body)
    feeds = feeds if feeds is not None else random_feeds(original)
    want, got = ort_run(original, feeds, optimize=ort_optimize), run_internal(rewritten, feeds)
    assert [o.name for o in rewritten.graph.output] == [o.name for o in original.graph.output]
    for w, g in zip(want, got):
        assert w.shape == g.shape, (w.shape, g.shape)
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(w).max())))


def node_named(model, name):
    return next(n for n in model.graph.node if n.name == name)


def attrs_of(node):
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def init_shape(model, name):
    return tuple(next(t for t in model.graph.initializer if t.name == name).dims)


def assert_unchanged(model, names=PASS):
    assert run_pass(model, names).SerializeToString() == model.SerializeToString()


# --- whole blocks -------------------------------------------------------------------------------
def mobilenet_v2_block():
    """RGB stem (C 3: the plain-input variant) + ReLU6, inverted residual (expand, depthwise,
    project, residual Add), a head conv, GlobalAveragePool."""
    net = Net()
    stem = net.relu6(net.conv("X", 3, 16, k=3, strides=[2, 2], pads=[1, 1, 1, 1], out="stem"), out="stem_act")
    e = net.relu6(net.conv(stem, 16, 48, out="expand"))
    d = net.relu6(net.conv(e, 48, 48, k=3, group=48, pads=[1, 1, 1, 1], out="depthwise"))
    p = net.conv(d, 48, 16, bias=False, out="project")
    r = net.op("Add", [p, stem], out="residual")
    h = net.relu6(net.conv(r, 16, 32, out="head"))
    net.op("GlobalAveragePool", [h], out="Y")
    return net.model([("X", F32, [2, 3, 16, 16])], ["Y"])


def test_mobilenet_v2_block_pass_alone():
    model = mobilenet_v2_block()
    out = run_pass(model, PASS)
    assert counts(out) == {"NchwcConv": 5, "Clip": 4, "Add": 1, "ReduceMean": 1, "FromNchwc": 1}
    # stem: plain X, weights [M/16, C, KH, KW, 16]; depthwise [C/8, KH, KW, 8]; pointwise [M/16, C/8, 1, 1, 8, 16]
    # (M = 16: output channels in pairs of blocks)
    assert node_named(out, "stem").input[0] == "X"
    assert init_shape(out, node_named(out, "stem").input[1]) == (1, 3, 3, 3, 16)
    assert init_shape(out, node_named(out, "depthwise").input[1]) == (6, 3, 3, 8)
    assert init_shape(out, node_named(out, "project").input[1]) == (1, 6, 1, 1, 8, 16)
    assert not {t.name for t in out.graph.initializer} & {"stem_W", "expand_W", "depthwise_W", "project_W"}
    # the elementwise ops run on blocked tensors; the pool too, only its [N, C, 1, 1] result is converted
    assert node_named(out, "residual").input[:] == ["project__nchwc", "stem_act__nchwc"]
    assert all(o.endswith("__nchwc") for n in out.graph.node if n.op_type in ("Clip", "Add") for o in n.output)
    pool = node_named(out, "Y")
    assert pool.op_type == "ReduceMean" and attrs_of(pool) == {"axes": [2, 3], "keepdims": 1}
    (convert,) = [n for n in out.graph.node if n.op_type == "FromNchwc"]
    assert convert.domain == DOMAIN and convert.input[0] == pool.output[0] == "Y__nchwc" and convert.output[0] == "Y"
    check(model, out)


def test_mobilenet_v2_block_after_the_kernel_fusions():
    model = mobilenet_v2_block()
    # it sees what fuse_epilogue / fuse_elementwise_chain wrote (only passes on its output follow;
    # the fused block's is left out here: test_pass_to_inverted_residual.py)
    assert KERNEL_FUSION_PIPELINE[-9:] == [PASS, "fold_transposes_into_nchwc_reorders",
                                           "fold_input_transpose_into_nchwc_conv", "fuse_channels_last_depthwise",
                                           "share_strided_subsample", "subsample_into_producer", "to_winograd_conv",
                                           "fold_channel_scale_into_nchwc_conv", "to_inverted_residual"]
    out = run_kernel_fusions(model, inverted_residual="off")
    assert op_types(out) == ["NchwcConv"] * 5 + ["ReduceMean", "FromNchwc"]
    project = node_named(out, "project")
    assert attrs_of(project).get("activation", b"") == b""
    assert project.input[3] == node_named(out, "stem").output[0]  # the residual Sum, read blocked
    for name in ("stem", "expand", "depthwise", "head"):
        attrs = attrs_of(node_named(out, name))
        assert (attrs["activation"], attrs["activation_params"]) == (b"Clip", [0.0, 6.0])
    check(model, out)


def resnet_block():
    """7x7/2 stem + Relu, MaxPool 3x3/2, a basic block (identity shortcut) and a downsampling
    block (1x1/2 projection shortcut), GlobalAveragePool, Flatten, Gemm."""
    net = Net(1)
    s = net.op("Relu", [net.conv("X", 3, 16, k=7, strides=[2, 2], pads=[3, 3, 3, 3], out="stem")])
    p = net.op("MaxPool", [s], out="pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    a = net.op("Relu", [net.conv(p, 16, 16, k=3, pads=[1, 1, 1, 1], out="a1")])
    b = net.conv(a, 16, 16, k=3, pads=[1, 1, 1, 1], out="a2")
    r1 = net.op("Relu", [net.op("Add", [b, p])])
    short = net.conv(r1, 16, 32, strides=[2, 2], out="shortcut")
    c = net.op("Relu", [net.conv(r1, 16, 32, k=3, strides=[2, 2], pads=[1, 1, 1, 1], out="b1")])
    d = net.conv(c, 32, 32, k=3, pads=[1, 1, 1, 1], out="b2")
    r2 = net.op("Relu", [net.op("Add", [d, short])])
    g = net.op("Flatten", [net.op("GlobalAveragePool", [r2])])
    net.inits["fc_W"] = net.rng.standard_normal((32, 10)).astype(np.float32)
    net.op("Gemm", [g, "fc_W"], out="Y")
    return net.model([("X", F32, [2, 3, 32, 32])], ["Y"])


def test_resnet_block_after_the_kernel_fusions():
    model = resnet_block()
    out = run_kernel_fusions(model)
    assert counts(out) == {"NchwcConv": 6, "NchwcMaxPool": 1, "ReduceMean": 1, "FromNchwc": 1,
                           "Flatten": 1, "Gemm": 1}
    sums = [n for n in out.graph.node if n.op_type == "NchwcConv" and len(n.input) > 3]
    # fuse_epilogue takes each residual Add into the first conv feeding it, the other conv's output as Sum
    assert [(n.name, n.input[3]) for n in sums] == [("a2", "pool__nchwc"), ("shortcut", "b2__nchwc")]
    assert all(attrs_of(n)["activation"] == b"Relu" for n in sums)
    assert attrs_of(node_named(out, "pool")) == {"kernel_shape": [3, 3], "strides": [2, 2], "dilations": [1, 1],
                                                 "pads": [1, 1, 1, 1]}
    check(model, out)


@pytest.mark.parametrize("make", [mobilenet_v2_block, resnet_block])
def test_a_second_run_changes_nothing(make):
    once = run_kernel_fusions(make())
    assert run_pass(once, PASS).SerializeToString() == once.SerializeToString()
    alone = run_pass(make(), PASS)
    assert run_pass(alone, PASS).SerializeToString() == alone.SerializeToString()


@pytest.mark.parametrize("c, m, want", [
    (16, 32, (2, 2, 3, 3, 8, 16)),  # M/8 even: pairs of blocks, 16 output channels per group
    (16, 24, (3, 2, 3, 3, 8, 8)),   # M/8 odd: one block per group
    (3, 48, (3, 3, 3, 3, 16)),      # plain input, paired
    (3, 40, (5, 3, 3, 3, 8)),
], ids=["blocked-paired", "blocked-single", "plain-paired", "plain-single"])
def test_weights_are_grouped_in_pairs_of_output_blocks_when_m_allows(c, m, want):
    net = Net()
    net.conv("X", c, m, k=3, pads=[1, 1, 1, 1], out="Y")
    model = net.model([("X", F32, [1, c, 6, 7])], ["Y"])
    out = run_pass(model, PASS)
    w_name = node_named(out, "Y").input[1]
    assert init_shape(out, w_name) == want
    # the contract's index formula: W[og, ib, kh, kw, i, o] = w[G·og + o, 8ib + i, kh, kw]
    got = numpy_helper.to_array(next(t for t in out.graph.initializer if t.name == w_name))
    w = numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == node_named(model, "Y").input[1]))
    per_group = want[-1]
    for og, o, ci in [(0, 0, 0), (len(got) - 1, per_group - 1, c - 1), (len(got) // 2, per_group // 2, c // 2)]:
        at = (og, ci // 8, 1, 2, ci % 8, o) if c % 8 == 0 else (og, ci, 1, 2, o)
        assert got[at] == w[per_group * og + o, ci, 1, 2]
    check(model, out)


# --- windows ------------------------------------------------------------------------------------
@pytest.mark.parametrize("c, m, group", [(8, 16, 1), (3, 16, 1), (16, 16, 16)], ids=["blocked", "plain", "depthwise"])
@pytest.mark.parametrize("attrs", [
    dict(strides=[2, 2], pads=[1, 0, 2, 1]),
    dict(dilations=[2, 1], pads=[2, 1, 2, 1]),
    dict(auto_pad="SAME_UPPER", strides=[2, 2]),
    dict(auto_pad="SAME_LOWER", strides=[1, 2]),
    dict(auto_pad="VALID", strides=[3, 2]),
], ids=["strides-pads", "dilations", "same-upper", "same-lower", "valid"])
def test_conv_windows_become_explicit(c, m, group, attrs):
    net = Net()
    net.conv("X", c, m, k=3, group=group, out="Y", **attrs)
    model = net.model([("X", F32, [2, c, 11, 10])], ["Y"])
    out = run_pass(model, PASS)
    assert counts(out) == {"NchwcConv": 1, "FromNchwc": 1, **({"ToNchwc": 1} if c % 8 == 0 else {})}
    conv = node_named(out, "Y")
    assert "auto_pad" not in attrs_of(conv) and len(attrs_of(conv)["pads"]) == 4
    check(model, out)


def test_same_upper_pads_are_resolved_from_the_input_size():
    net = Net()
    net.conv("X", 8, 8, k=3, out="Y", auto_pad="SAME_UPPER", strides=[2, 2])
    out = run_pass(net.model([("X", F32, [1, 8, 7, 8])], ["Y"]), PASS)
    assert attrs_of(node_named(out, "Y"))["pads"] == [1, 0, 1, 1]


@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1, pads=[1, 1, 1, 1]),
    dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
    dict(kernel_shape=[3, 2], strides=[1, 2], auto_pad="SAME_LOWER"),
    dict(kernel_shape=[2, 2], dilations=[2, 2], pads=[0, 1, 1, 0]),
], ids=["ceil", "ceil-pads", "same-upper", "same-lower", "dilations"])
def test_max_pool_on_a_blocked_tensor(attrs):
    net = Net()
    c = net.conv("X", 8, 16, k=3, pads=[1, 1, 1, 1])
    net.op("MaxPool", [c], out="Y", **attrs)
    model = net.model([("X", F32, [2, 8, 10, 9])], ["Y"], opset=13)
    out = run_pass(model, PASS)
    assert counts(out) == {"ToNchwc": 1, "NchwcConv": 1, "NchwcMaxPool": 1, "FromNchwc": 1}
    pool = attrs_of(node_named(out, "Y"))
    assert "auto_pad" not in pool and len(pool["pads"]) == 4 and pool.get("ceil_mode", 0) == attrs.get("ceil_mode", 0)
    check(model, out)


def keras_stem(relu=True, pad_amounts=(0, 0, 1, 1, 0, 0, 1, 1), pad_value=None, mode=None, pool_attrs=None,
               pad_read_elsewhere=False):
    """Keras ResNet's stem: conv -> Relu -> ZeroPadding2D (a Pad) -> MaxPool 3x3/2 -> conv."""
    net = Net()
    x = net.conv("X", 3, 16, k=3, strides=[2, 2], pads=[1, 1, 1, 1], out="stem")
    if relu:
        x = net.op("Relu", [x], out="stem_relu")
    pad_inputs = [x, net.const(list(pad_amounts), np.int64)]
    if pad_value is not None:
        pad_inputs.append(net.const(pad_value))
    pad = net.op("Pad", pad_inputs, out="padded", **({"mode": mode} if mode else {}))
    pool = net.op("MaxPool", [pad], out="pool", **(pool_attrs or dict(kernel_shape=[3, 3], strides=[2, 2])))
    outputs = ["Y"] + (["Z"] if pad_read_elsewhere else [])
    net.conv(pool, 16 + pad_amounts[1] + pad_amounts[5], 16, k=1, out="Y")
    if pad_read_elsewhere:
        net.op("ReduceMax", [pad], out="Z", keepdims=1)
    return net.model([("X", F32, [2, 3, 22, 21])], outputs)


@pytest.mark.parametrize("relu", [True, False], ids=["after-relu", "negative-values"])
def test_zero_pad_before_max_pool_folds_into_it(relu):
    model = keras_stem(relu=relu)
    out = run_kernel_fusions(model)
    assert counts(out) == {"NchwcConv": 2, "NchwcMaxPool": 1, "FromNchwc": 1}  # no Pad, nothing converted
    assert attrs_of(node_named(out, "pool")) == {"kernel_shape": [3, 3], "strides": [2, 2], "dilations": [1, 1],
                                                 "pads": [1, 1, 1, 1], "zero_pads": 1}
    assert not any(t.name.startswith("const") for t in out.graph.initializer)  # the Pad's amounts went with it
    # Without the Relu the zeros win over negative values at the borders; onnxruntime's own Pad
    # fusion gets that wrong (it folds the zero Pad into MaxPool's -inf pads), so the oracle runs
    # unoptimized.
    check(model, out, ort_optimize=False)


@pytest.mark.parametrize("kwargs", [
    dict(pad_value=0.5),
    dict(pad_amounts=(0, 4, 1, 1, 0, 4, 1, 1)),   # pads the channels too
    dict(pad_amounts=(1, 0, 1, 1, 0, 0, 1, 1)),   # pads the batch
    dict(mode="edge"),
    dict(pool_attrs=dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    dict(pool_attrs=dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    dict(pad_read_elsewhere=True),
], ids=["nonzero-value", "channel-pads", "batch-pads", "edge-mode", "pool-pads", "pool-ceil", "pad-read-twice"])
def test_pads_that_do_not_fold_stay_before_an_nchw_max_pool(kwargs):
    model = keras_stem(**kwargs)
    out = run_kernel_fusions(model)
    assert counts(out)["Pad"] == 1 and "zero_pads" not in attrs_of(node_named(out, "pool"))
    check(model, out)


def test_max_pool_with_indices_stays_nchw():
    net = Net()
    c = net.conv("X", 8, 8, out="c")
    net.nodes.append(helper.make_node("MaxPool", [c], ["Y", "I"], kernel_shape=[2, 2], strides=[2, 2]))
    model = typed_outputs(make_model(net.nodes, [("X", F32, [1, 8, 4, 4])],
                                     [("Y", F32, None), ("I", onnx.TensorProto.INT64, None)], net.inits))
    out = run_pass(model, PASS)
    assert op_types(out) == ["ToNchwc", "NchwcConv", "FromNchwc", "MaxPool"]
    check(model, out)


# --- what stays blocked, what reads NCHW ----------------------------------------------------------
@pytest.mark.parametrize("axis", [1, -3])
def test_concat_on_channels_stays_blocked(axis):
    net = Net()
    a = net.conv("X", 8, 8, k=3, pads=[1, 1, 1, 1])
    b = net.conv("X", 8, 16)
    cat = net.op("Concat", [a, b], axis=axis, out="cat")
    net.conv(cat, 24, 8, out="Y")
    model = net.model([("X", F32, [2, 8, 6, 6])], ["Y"])
    out = run_pass(model, PASS)
    assert counts(out) == {"ToNchwc": 1, "NchwcConv": 3, "Concat": 1, "FromNchwc": 1}
    assert attrs_of(node_named(out, "cat"))["axis"] == 1 and node_named(out, "cat").output[0] == "cat__nchwc"
    check(model, out)


def test_concat_on_another_axis_reads_nchw():
    net = Net()
    a, b = net.conv("X", 8, 8), net.conv("X", 8, 8)
    net.op("Concat", [a, b], axis=2, out="Y")
    model = net.model([("X", F32, [2, 8, 3, 3])], ["Y"])
    out = run_pass(model, PASS)
    assert counts(out) == {"ToNchwc": 1, "NchwcConv": 2, "FromNchwc": 2, "Concat": 1}
    check(model, out)


def test_a_blocked_tensor_that_is_an_output_and_read_by_an_nchw_op_is_converted_once():
    net = Net()
    net.conv("X", 8, 16, k=3, pads=[1, 1, 1, 1], out="Y")
    net.op("GlobalMaxPool", ["Y"], out="G")
    net.op("Relu", ["Y"], out="R")  # stays blocked, itself an output
    model = net.model([("X", F32, [2, 8, 5, 5])], ["Y", "G", "R"])
    out = run_pass(model, PASS)
    assert counts(out) == {"ToNchwc": 1, "NchwcConv": 1, "Relu": 1, "FromNchwc": 2, "GlobalMaxPool": 1}
    from_nchwc = {n.input[0]: n.output[0] for n in out.graph.node if n.op_type == "FromNchwc"}
    assert from_nchwc == {"Y__nchwc": "Y", "R__nchwc": "R"}
    assert not {vi.name for vi in out.graph.value_info} & {"Y", "R"}
    check(model, out)


def test_elementwise_operands_decide_the_layout():
    net = Net()
    c = net.conv("X", 8, 8, out="c")
    scaled = net.op("Mul", [c, net.const([[[[0.5]]]])], out="scaled")         # one-element constant: blocked
    shifted = net.op("Add", [scaled, net.const(np.ones((1, 8, 1, 4)))], out="shifted")  # per channel and column: NCHW
    net.op("Relu", [shifted], out="Y")                                          # reads an NCHW tensor: NCHW
    model = net.model([("X", F32, [1, 8, 4, 4])], ["Y"])
    out = run_pass(model, PASS)
    assert op_types(out) == ["ToNchwc", "NchwcConv", "Mul", "FromNchwc", "Add", "Relu"]
    assert node_named(out, "scaled").output[0] == "scaled__nchwc"
    check(model, out)


def densenet_layer():
    """DenseNet's pre-activation layers: BatchNorm as per-channel Mul/Add ([C, 1, 1] and
    [1, C, 1, 1] constants) + Relu before each conv, the block's input and conv outputs
    concatenated, a transition (BN, Relu, 1x1 conv, 2x2 average pool) and a second block."""
    net = Net(2)

    def bn_relu(x, c, scale_shape):
        scale = net.const(net.rng.uniform(0.5, 1.5, c).reshape(scale_shape))
        shift = net.const(net.rng.standard_normal(c).reshape(scale_shape))
        return net.op("Relu", [net.op("Add", [net.op("Mul", [x, scale]), shift])])

    x = net.conv("X", 8, 16, k=3, pads=[1, 1, 1, 1], out="stem")
    for i in range(2):
        grown = net.conv(bn_relu(x, 16 + 8 * i, (16 + 8 * i, 1, 1)), 16 + 8 * i, 8, k=3, pads=[1, 1, 1, 1])
        x = net.op("Concat", [x, grown], axis=1, out=f"block1_cat{i}")
    t = net.conv(bn_relu(x, 32, (1, 32, 1, 1)), 32, 16, bias=False, out="transition")
    pooled = net.op("AveragePool", [t], out="pool", kernel_shape=[2, 2], strides=[2, 2])
    grown = net.conv(bn_relu(pooled, 16, (1, 16, 1, 1)), 16, 8, k=3, pads=[1, 1, 1, 1])
    net.op("Concat", [pooled, grown], axis=1, out="Y")
    return net


def test_densenet_pre_activation_and_concatenations_stay_blocked():
    net = densenet_layer()
    model = net.model([("X", F32, [2, 8, 6, 6])], ["Y"])
    # without per_channel_affine_to_depthwise_conv, which would make the Mul/Add depthwise convolutions
    # (test_pass_per_channel_affine.py)
    out = run_pass(model, [p for p in KERNEL_FUSION_PIPELINE if p != "per_channel_affine_to_depthwise_conv"])
    # one conversion in (the graph input), one out (the graph output): no Mul/Add/Relu/Concat reads NCHW
    assert counts(out) == {"ToNchwc": 1, "NchwcConv": 5, "Mul": 4, "Add": 4, "Relu": 4, "Concat": 3,
                           "NchwcAveragePool": 1, "FromNchwc": 1}
    for node in out.graph.node:
        if node.op_type in ("Mul", "Add"):
            scale = node.input[1]
            assert scale.endswith("__nchwc") and init_shape(out, scale)[:1] + init_shape(out, scale)[2:] == (1, 1, 1, 8)
    assert not {t.name for t in out.graph.initializer} & {n for n in net.inits if n.startswith("const")}
    assert attrs_of(node_named(out, "pool")) == {"kernel_shape": [2, 2], "strides": [2, 2], "dilations": [1, 1],
                                                 "pads": [0, 0, 0, 0]}
    check(model, out)


def test_per_channel_constants_are_relaid_out_channel_by_channel():
    net = Net()
    c = net.conv("X", 8, 16, out="c")
    scale = np.arange(16, dtype=np.float32).reshape(16, 1, 1)
    net.op("Mul", [c, net.const(scale)], out="Y")
    model = net.model([("X", F32, [1, 8, 3, 3])], ["Y"])
    out = run_pass(model, PASS)
    got = numpy_helper.to_array(next(t for t in out.graph.initializer if t.name == node_named(out, "Y").input[1]))
    assert got.shape == (1, 2, 1, 1, 8) and got[0, 1, 0, 0, 3] == 11  # channel 8·1 + 3
    check(model, out)


def test_constants_of_one_value_per_image_and_channel_read_nchw():
    net = Net()
    c = net.conv("X", 8, 8, out="c")
    net.op("Add", [c, net.const(np.arange(16).reshape(2, 8, 1, 1))], out="Y")  # [N, C, 1, 1]: not per channel
    model = net.model([("X", F32, [2, 8, 3, 3])], ["Y"])
    out = run_pass(model, PASS)
    assert op_types(out) == ["ToNchwc", "NchwcConv", "FromNchwc", "Add"]
    check(model, out)


def test_a_per_channel_constant_also_read_in_nchw_is_kept():
    net = Net()
    c = net.conv("X", 8, 8, out="c")
    scale = net.const(np.full((1, 8, 1, 1), 2.0))
    net.op("Mul", [c, scale], out="Y")
    net.op("Mul", ["X", scale], out="Z")  # nothing blocked flows into it: NCHW, with the original constant
    model = net.model([("X", F32, [1, 8, 2, 2])], ["Y", "Z"])
    out = run_pass(model, PASS)
    assert node_named(out, "Z").input[:] == ["X", scale] and node_named(out, "Y").input[1] == scale + "__nchwc"
    check(model, out)


def squeeze_and_excite(mean="GlobalAveragePool", opset=13, as_net=False):
    """EfficientNet's block: expand conv, depthwise, squeeze (a spatial mean), two 1x1 convs on
    [N, C, 1, 1] (the first with M % 8 != 0), Sigmoid, the excitation Mul, project conv."""
    net = Net(4)
    e = net.conv("X", 8, 32, out="expand")
    d = net.conv(e, 32, 32, k=3, group=32, pads=[1, 1, 1, 1], out="depthwise")
    if mean == "GlobalAveragePool":
        s = net.op("GlobalAveragePool", [d], out="squeeze")
    elif opset >= 18:
        s = net.op("ReduceMean", [d, net.const([-1, 2], np.int64)], out="squeeze", keepdims=1)
    else:
        s = net.op("ReduceMean", [d], out="squeeze", axes=[2, 3], keepdims=1)
    r = net.op("Relu", [net.conv(s, 32, 4, out="reduce")])
    g = net.op("Sigmoid", [net.conv(r, 4, 32, out="excite")], out="gate")
    scaled = net.op("Mul", [d, g], out="scaled")
    # 32 outputs on 25 pixels: the float32 Mul stays a step (fold_channel_scale_into_nchwc_conv)
    net.conv(scaled, 32, 32, out="Y")
    return net if as_net else net.model([("X", F32, [2, 8, 5, 5])], ["Y"], opset=opset)


@pytest.mark.parametrize("mean, opset", [("GlobalAveragePool", 13), ("ReduceMean", 13), ("ReduceMean", 18)],
                         ids=["global-average-pool", "reduce-mean-attribute", "reduce-mean-input"])
def test_squeeze_and_excite_stays_blocked(mean, opset):
    model = squeeze_and_excite(mean, opset)
    out = run_kernel_fusions(model)
    # the reduce conv (M = 4) runs padded to one block: only the input and the output are converted
    assert counts(out) == {"ToNchwc": 1, "NchwcConv": 5, "ReduceMean": 1, "FromNchwc": 1, "Mul": 1}
    squeeze = node_named(out, "squeeze")
    assert squeeze.input[0] == "depthwise__nchwc" and squeeze.output[0] == "squeeze__nchwc"
    assert node_named(out, "scaled").input[:] == ["depthwise__nchwc", "gate__nchwc"]
    reduce, excite = node_named(out, "reduce"), node_named(out, "excite")
    assert reduce.op_type == excite.op_type == "NchwcConv" and excite.input[0] == reduce.output[0]
    assert init_shape(out, reduce.input[1]) == (1, 4, 1, 1, 8, 8) and init_shape(out, reduce.input[2]) == (8,)
    assert init_shape(out, excite.input[1]) == (2, 1, 1, 1, 8, 16)  # C = 4 read as one padded block
    check(model, out)


@pytest.mark.parametrize("reader", ["Relu", "output", "grouped-conv"])
def test_a_narrow_conv_stays_nchw_unless_only_blocked_convs_read_it(reader):
    net = Net()
    narrow = net.conv(net.conv("X", 8, 8, out="a"), 8, 12, out="narrow")
    outputs = ["Y"]
    if reader == "Relu":
        net.op("Relu", [narrow], out="Y")
    elif reader == "output":
        net.conv(narrow, 12, 8, out="Y")
        outputs.append("narrow")
    else:
        net.conv(narrow, 12, 12, k=3, group=2, pads=[1, 1, 1, 1], out="Y")
    model = net.model([("X", F32, [1, 8, 4, 4])], outputs)
    out = run_pass(model, PASS)
    assert node_named(out, "narrow").op_type == "Conv"
    check(model, out)


def test_narrow_convs_padded_in_float16():
    net = squeeze_and_excite(as_net=True)
    model = fp16_model(net, [("X", F16, [2, 8, 5, 5])], ["Y"])
    out = run_kernel_fusions(model)
    assert counts(out)["NchwcConv"] == 5 and "FusedConv" not in counts(out)
    assert next(t for t in out.graph.initializer if t.name == node_named(out, "reduce").input[2]).data_type == F16


def test_spatial_means_that_do_not_fit_read_nchw():
    net = Net()
    c = net.conv("X", 8, 8, out="c")
    net.op("ReduceMean", [c], out="A", axes=[2, 3], keepdims=0)  # drops H and W
    net.op("ReduceMean", [c], out="B", axes=[1, 2, 3], keepdims=1)  # over channels too
    model = net.model([("X", F32, [1, 8, 3, 3])], ["A", "B"])
    out = run_pass(model, PASS)
    assert counts(out) == {"ToNchwc": 1, "NchwcConv": 1, "FromNchwc": 1, "ReduceMean": 2}
    assert all(n.input[0] == "c" for n in out.graph.node if n.op_type == "ReduceMean")
    check(model, out)


@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]),
    dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1], count_include_pad=1),
    dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
    dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, pads=[1, 1, 1, 1], count_include_pad=1),
    dict(kernel_shape=[2, 3], strides=[2, 1], auto_pad="SAME_UPPER"),
    dict(kernel_shape=[2, 2], strides=[2, 2]),
], ids=["same-exclude-pad", "same-include-pad", "ceil", "ceil-pads-include-pad", "auto-pad", "densenet"])
def test_average_pool_on_a_blocked_tensor(attrs):
    net = Net()
    c = net.conv("X", 8, 16, k=3, pads=[1, 1, 1, 1])
    net.op("AveragePool", [c], out="Y", **attrs)
    model = net.model([("X", F32, [2, 8, 10, 9])], ["Y"], opset=13)
    out = run_pass(model, PASS)
    assert counts(out) == {"ToNchwc": 1, "NchwcConv": 1, "NchwcAveragePool": 1, "FromNchwc": 1}
    pool = attrs_of(node_named(out, "Y"))
    assert "auto_pad" not in pool and len(pool["pads"]) == 4 and pool.get("ceil_mode", 0) == attrs.get("ceil_mode", 0)
    assert pool.get("count_include_pad", 0) == attrs.get("count_include_pad", 0)
    check(model, out)


def test_elementwise_with_a_broadcast_or_an_unblocked_operand_reads_nchw():
    net = Net()
    c = net.conv("X", 8, 8, out="c")
    net.op("Add", [c, "R"], out="Y")     # R [1, 8, 1, 4]: a run-time operand that is not blocked
    net.op("Sub", [c, "X"], out="Z")     # X has a blocked form (ToNchwc for the conv): stays blocked
    model = net.model([("X", F32, [1, 8, 4, 4]), ("R", F32, [1, 8, 1, 4])], ["Y", "Z"])
    out = run_pass(model, PASS)
    assert op_types(out) == ["ToNchwc", "NchwcConv", "FromNchwc", "Add", "Sub", "FromNchwc"]
    assert node_named(out, "Z").input[:] == ["c__nchwc", "X__nchwc"]
    check(model, out)


def test_fused_conv_sum_from_an_nchw_tensor_gets_one_to_nchwc():
    net = Net()
    c = net.conv("X", 3, 16, k=3, pads=[1, 1, 1, 1], out="c")
    net.op("Relu", [net.op("Add", [c, "R"])], out="Y")
    net.op("Sigmoid", ["R"], out="S")  # R is also read in NCHW (nothing blocked flows into it: stays NCHW)
    model = net.model([("X", F32, [2, 3, 5, 5]), ("R", F32, [2, 16, 5, 5])], ["Y", "S"])
    out = run_kernel_fusions(model)
    assert counts(out) == {"ToNchwc": 1, "NchwcConv": 1, "FromNchwc": 1, "Sigmoid": 1}
    assert node_named(out, "S").input[0] == "R"
    (to,) = [n for n in out.graph.node if n.op_type == "ToNchwc"]
    assert to.input[0] == "R" and node_named(out, "c").input[3] == to.output[0]
    check(model, out)


def test_a_graph_input_read_by_two_convs_is_converted_once():
    net = Net()
    net.conv("X", 16, 8, out="A")
    net.conv("X", 16, 16, k=3, group=16, pads=[1, 1, 1, 1], out="B")
    model = net.model([("X", F32, [1, 16, 4, 4])], ["A", "B"])
    out = run_pass(model, PASS)
    assert counts(out) == {"ToNchwc": 1, "NchwcConv": 2, "FromNchwc": 2}
    check(model, out)


def test_fused_elementwise_on_blocked_tensors_stays_blocked():
    net = Net()
    c = net.conv("X", 8, 8, k=3, pads=[1, 1, 1, 1], out="c")
    net.op("GlobalMaxPool", [c], out="G")  # a second reader: no epilogue
    t = net.op("Sigmoid", [net.op("Add", [net.op("Mul", [c, net.const(0.5)]), net.const(1.0)])])
    net.conv(t, 8, 8, out="Y")
    model = net.model([("X", F32, [2, 8, 4, 4])], ["Y", "G"])
    out = run_kernel_fusions(model)
    assert op_types(out) == ["ToNchwc", "NchwcConv", "FromNchwc", "GlobalMaxPool", "FusedElementwise",
                             "NchwcConv", "FromNchwc"]
    fused = out.graph.node[4]
    assert fused.input[:] == ["c__nchwc"] and fused.output[0].endswith("__nchwc")
    check(model, out)


@pytest.mark.parametrize("activation", ["Relu", "LeakyRelu", "HardSigmoid", "HardSwish", "Sigmoid", "Tanh",
                                        "Swish", "Gelu"])
def test_fused_conv_activations_carry_over(activation):
    net = Net()
    c = net.conv("X", 8, 16, k=3, pads=[1, 1, 1, 1], out="c")
    if activation == "Swish":
        net.op("Mul", [c, net.op("Sigmoid", [c])], out="Y")
    elif activation == "Gelu":
        net.op("Gelu", [c], out="Y")
    else:
        net.op(activation, [c], out="Y")
    model = net.model([("X", F32, [2, 8, 5, 5])], ["Y"], opset=20 if activation == "Gelu" else 14)
    out = run_kernel_fusions(model)
    assert op_types(out) == ["ToNchwc", "NchwcConv", "FromNchwc"]
    expected = {"Gelu": b"GeluErf"}.get(activation, activation.encode())
    assert attrs_of(out.graph.node[1])["activation"] == expected
    check(model, out)


def test_control_flow_bodies_read_the_nchw_tensor():
    net = Net()
    c = net.conv("X", 8, 8, out="c")
    then = helper.make_graph([helper.make_node("Relu", [c], ["t"])], "then", [], [helper.make_tensor_value_info(
        "t", F32, [1, 8, 3, 3])])
    other = helper.make_graph([helper.make_node("Neg", [c], ["e"])], "else", [], [helper.make_tensor_value_info(
        "e", F32, [1, 8, 3, 3])])
    net.nodes.append(helper.make_node("If", ["cond"], ["Y"], then_branch=then, else_branch=other))
    model = make_model(net.nodes, [("X", F32, [1, 8, 3, 3]), ("cond", onnx.TensorProto.BOOL, [])],
                       [("Y", F32, [1, 8, 3, 3])], net.inits)
    out = run_pass(model, PASS)
    assert op_types(out) == ["ToNchwc", "NchwcConv", "FromNchwc", "If"]
    assert out.graph.node[2].output[0] == "c"
    assert out.graph.node[3].attribute[0].g.node[0].input[0] == "c"
    for cond in (True, False):
        check(model, out, {"X": random_feeds(model)["X"], "cond": np.array(cond)})


def test_shared_weights_are_relaid_out_once_and_kept_while_read():
    net = Net()
    a = net.conv("X", 8, 8, out="a")
    net.conv(a, 8, 8, out="Y", weights="a_W")
    net.op("Identity", ["a_W"], out="W_out")  # the original weights are still read
    model = net.model([("X", F32, [1, 8, 3, 3])], ["Y", "W_out"])
    out = run_pass(model, PASS)
    names = [t.name for t in out.graph.initializer]
    assert names.count("a_W__nchwc") == 1 and "a_W" in names
    assert node_named(out, "a").input[1] == node_named(out, "Y").input[1] == "a_W__nchwc"
    check(model, out)


# --- left alone ------------------------------------------------------------------------------------
@pytest.mark.parametrize("c, m, group", [(8, 12, 1), (16, 16, 2), (12, 12, 12), (4, 4, 4)],
                         ids=["m-not-multiple-of-8", "grouped", "depthwise-c12", "depthwise-c4"])
def test_convs_that_do_not_fit_stay_nchw(c, m, group):
    net = Net()
    net.op("Relu", [net.conv("X", c, m, k=3, group=group, pads=[1, 1, 1, 1])], out="Y")
    model = net.model([("X", F32, [1, c, 5, 5])], ["Y"])
    assert_unchanged(model)
    assert_unchanged(run_pass(model, KERNEL_FUSION_PIPELINE[:-1]))  # as FusedConv too


def test_an_nchw_conv_between_blocked_ones():
    net = Net()
    a = net.conv("X", 8, 16, out="a")
    b = net.conv(a, 16, 16, k=3, group=2, pads=[1, 1, 1, 1], out="b")  # grouped: stays Conv
    net.conv(b, 16, 8, out="Y")
    model = net.model([("X", F32, [1, 8, 4, 4])], ["Y"])
    out = run_pass(model, PASS)
    assert op_types(out) == ["ToNchwc", "NchwcConv", "FromNchwc", "Conv", "ToNchwc", "NchwcConv", "FromNchwc"]
    check(model, out)


def fp16_model(net, inputs, outputs):
    net.inits = {k: v.astype(np.float16) for k, v in net.inits.items()}
    return typed_outputs(make_model(net.nodes, inputs, [(o, F16, None) for o in outputs], net.inits))


def test_fp16_chain_is_blocked_in_fp16():
    """A float16 model (after float_to_half) is blocked like a float32 one: float16 tensors and
    weights, and the result of onnxruntime on the float16 model within float16 rounding."""
    net = Net()
    a = net.op("Relu", [net.conv("X", 8, 16, k=3, pads=[1, 1, 1, 1])])
    b = net.conv(a, 16, 16, k=3, group=16, pads=[1, 1, 1, 1])  # depthwise
    pool = net.op("MaxPool", [net.op("Add", [b, a])], kernel_shape=[2, 2], strides=[2, 2])
    net.conv(pool, 16, 8, out="Y")
    model = fp16_model(net, [("X", F16, [2, 8, 6, 6])], ["Y"])
    out = run_pass(model, PASS)
    assert counts(out) == {"ToNchwc": 1, "NchwcConv": 3, "Relu": 1, "Add": 1, "NchwcMaxPool": 1, "FromNchwc": 1}
    types = infer_types(out, strict=True).types
    assert {types[o].elem_type for n in out.graph.node for o in n.output} == {F16}
    assert {t.data_type for t in out.graph.initializer} == {F16}
    lower_graph(out, WeightStore(), "test.onnx")
    feeds = {"X": np.random.default_rng(3).standard_normal((2, 8, 6, 6)).astype(np.float16)}
    (want,), (got,) = ort_run(model, feeds), run_internal(out, feeds)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-2, atol=2e-2)


def test_fp16_through_the_kernel_fusions():
    """FusedConv (bias + Relu) in float16 becomes a float16 NchwcConv carrying the activation."""
    net = Net()
    net.op("Relu", [net.conv(net.op("Relu", [net.conv("X", 8, 16, k=3)]), 16, 8)], out="Y")
    model = fp16_model(net, [("X", F16, [1, 8, 5, 5])], ["Y"])
    out = run_pass(model, KERNEL_FUSION_PIPELINE)
    assert counts(out) == {"ToNchwc": 1, "NchwcConv": 2, "FromNchwc": 1}
    assert [attrs_of(n).get("activation") for n in out.graph.node if n.op_type == "NchwcConv"] == [b"Relu", b"Relu"]


@pytest.mark.parametrize("make, x_shape, blocked_op", [
    (densenet_layer, [2, 8, 6, 6], "NchwcAveragePool"),
    (lambda: squeeze_and_excite(as_net=True), [2, 8, 5, 5], "ReduceMean"),
], ids=["densenet", "squeeze-and-excite"])
def test_fp16_per_channel_operands_means_and_average_pools(make, x_shape, blocked_op):
    """The float16 model blocked the same way (per-channel constants re-laid out in float16),
    within float16 rounding of onnxruntime on the float16 model."""
    model = fp16_model(make(), [("X", F16, x_shape)], ["Y"])
    out = run_kernel_fusions(model)
    assert counts(out)["ToNchwc"] == 1 and blocked_op in counts(out)
    assert {t.data_type for t in out.graph.initializer if t.name.endswith("__nchwc")} == {F16}
    lower_graph(out, WeightStore(), "test.onnx")
    feeds = {"X": np.random.default_rng(5).standard_normal(x_shape).astype(np.float16)}
    (want,), (got,) = ort_run(model, feeds), run_internal(out, feeds)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-2,
                               atol=2e-2 * max(1.0, float(np.abs(want.astype(np.float32)).max())))


def test_mixed_float_types_stay_nchw():
    """A float16 conv whose float32 weights were never converted is not a valid Conv to block."""
    net = Net()
    net.conv("X", 8, 16, k=1, bias=False, out="Y")
    model = make_model(net.nodes, [("X", F16, [1, 8, 2, 2])], [("Y", F16, [1, 16, 2, 2])], net.inits)
    assert net.inits["Y_W"].dtype == np.float32
    assert_unchanged(model)


def test_dynamic_shapes_are_left_alone():
    net = Net()
    net.conv("X", 8, 16, k=3, out="Y")
    assert_unchanged(net.model([("X", F32, ["N", 8, 5, 5])], ["Y"]))


def test_weights_computed_at_run_time_are_left_alone():
    nodes = [helper.make_node("Conv", ["X", "W"], ["Y"])]
    assert_unchanged(make_model(nodes, [("X", F32, [1, 8, 3, 3]), ("W", F32, [8, 8, 1, 1])], [("Y", F32, None)]))


def test_model_without_convs_is_unchanged():
    inits = {"W": np.ones((4, 8), np.float32), "b": np.zeros(8, np.float32)}
    nodes = [helper.make_node("MatMul", ["X", "W"], ["h"]), helper.make_node("Add", ["h", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["Y"])]
    model = typed_outputs(make_model(nodes, [("X", F32, [2, 4])], [("Y", F32, None)], inits))
    assert_unchanged(model)


def test_constant_node_weights_are_dropped_once_unread():
    w = np.random.default_rng(3).standard_normal((8, 8, 1, 1)).astype(np.float32)
    nodes = [helper.make_node("Constant", [], ["W"], value=numpy_helper.from_array(w)),
             helper.make_node("Conv", ["X", "W"], ["Y"], name="conv")]
    model = typed_outputs(make_model(nodes, [("X", F32, [1, 8, 2, 2])], [("Y", F32, None)]))
    out = run_pass(model, PASS)
    assert op_types(out) == ["ToNchwc", "NchwcConv", "FromNchwc"]
    check(model, out)


# --- on the emulator -------------------------------------------------------------------------------
def densenet_model():
    return densenet_layer().model([("X", F32, [2, 8, 6, 6])], ["Y"])


def inception_pool_branch():
    """Inception's pool branch (3x3/1 'same' average pool, count_include_pad 0, then a 1x1 conv)
    beside a conv branch, concatenated, and a 3x3/2 ceil_mode average pool counting the pads."""
    net = Net(6)
    x = net.op("Relu", [net.conv("X", 3, 16, k=3, out="stem")])
    pooled = net.op("AveragePool", [x], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    cat = net.op("Concat", [net.conv(pooled, 16, 8), net.conv(x, 16, 8, k=3, pads=[1, 1, 1, 1])], axis=1)
    net.op("AveragePool", [cat], out="Y", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1,
           count_include_pad=1)
    return net.model([("X", F32, [2, 3, 12, 11])], ["Y"])


@pytest.mark.parametrize("make, conversions", [
    (mobilenet_v2_block, 1), (resnet_block, 1),
    (densenet_model, 2),       # the input in, the output out
    (squeeze_and_excite, 2),   # the reduce conv (M = 4) runs padded to a block
    (inception_pool_branch, 1),
])
def test_the_emulator_runs_the_blocked_models(make, conversions):
    from compiler import Compiler
    from compiler.options import CompilerOptions
    from tf_popef_op.runtime import ModelRunner, RuntimeConfig
    model = make()
    feeds = random_feeds(model)
    want = ort_run(model, feeds)[0]
    executable = Compiler.compile(model)
    ops = [s["op"] for s in executable.executable["programs"]["main"]]
    assert "NchwcConv" in ops and "Conv" not in ops and "AveragePool" not in ops
    assert ops.count("ToNchwc") + ops.count("FromNchwc") == conversions
    got = ModelRunner(executable, RuntimeConfig()).execute(feeds)["Y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * max(1.0, float(np.abs(want).max())))
    plain = Compiler.compile(model, options=CompilerOptions(blocked_layout=False))
    assert not any(s["op"].startswith("Nchwc") for s in plain.executable["programs"]["main"])
