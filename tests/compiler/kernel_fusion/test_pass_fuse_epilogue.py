"""fuse_epilogue and the fused kernels: Conv / Gemm / MatMul followed by a bias Add, a residual
Add and an activation (single ops, or the multi-node Swish / Gelu forms tf2onnx emits) become
one FusedConv / FusedGemm / FusedMatMul. Each case checks the graph after the pass, then
compiles the original model (the compile step runs the fusion) and compares the emulator with
onnxruntime running the original, unfused model, in fp32 and fp16."""
import numpy as np
import pytest
from onnx import helper, numpy_helper

from compiler import Compiler
from compiler.converter import Converter
from compiler.onnx_graph.internal_ops import DOMAIN
from compiler_test_helpers import F32, check_kernel_fusion_numerics, make_model, op_types, ort_run, run_pass
from tf_popef_op.runtime import ModelRunner, RuntimeConfig


def _const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value, np.float32)))


def activation_nodes(kind, x, y):
    """The ONNX nodes computing activation `kind` from x into y (opset 17; Gelu: 20)."""
    n = helper.make_node
    if kind == "Relu":
        return [n("Relu", [x], [y])]
    if kind == "Relu6":
        return [_const("lo", 0.0), _const("hi", 6.0), n("Clip", [x, "lo", "hi"], [y])]
    if kind == "ClipRange":
        return [_const("lo", -1.0), _const("hi", 2.0), n("Clip", [x, "lo", "hi"], [y])]
    if kind == "ClipMaxOnly":
        return [_const("hi", 0.5), n("Clip", [x, "", "hi"], [y])]
    if kind == "LeakyRelu":
        return [n("LeakyRelu", [x], [y], alpha=0.1)]
    if kind in ("Sigmoid", "Tanh", "HardSwish"):
        return [n(kind, [x], [y])]
    if kind == "HardSigmoid":
        return [n("HardSigmoid", [x], [y], alpha=0.3, beta=0.4)]
    if kind == "Swish":
        return [n("Sigmoid", [x], ["sig"]), n("Mul", [x, "sig"], [y])]
    if kind == "GeluErf":  # tf2onnx's tf.nn.gelu(approximate=False)
        return [_const("half", 0.5), _const("sqrt2", np.sqrt(2.0)), _const("one", 1.0),
                n("Mul", [x, "half"], ["a"]), n("Div", [x, "sqrt2"], ["b"]), n("Erf", ["b"], ["c"]),
                n("Add", ["c", "one"], ["d"]), n("Mul", ["a", "d"], [y])]
    if kind == "GeluTanh":  # tf2onnx's tf.nn.gelu(approximate=True)
        return [_const("three", 3.0), _const("k", 0.044715), _const("s", np.sqrt(2.0 / np.pi)), _const("one", 1.0),
                _const("half", 0.5),
                n("Pow", [x, "three"], ["p"]), n("Mul", ["k", "p"], ["q"]), n("Add", [x, "q"], ["r"]),
                n("Mul", ["r", "s"], ["t"]), n("Tanh", ["t"], ["u"]), n("Add", ["one", "u"], ["v"]),
                n("Mul", ["half", x], ["w"]), n("Mul", ["w", "v"], [y])]
    if kind == "GeluOp":
        return [n("Gelu", [x], [y])]
    if kind == "GeluOpTanh":
        return [n("Gelu", [x], [y], approximate="tanh")]
    raise ValueError(kind)


EXPECTED_ACTIVATION = {"Relu": "Relu", "Relu6": "Clip", "ClipRange": "Clip", "ClipMaxOnly": "Clip",
                       "LeakyRelu": "LeakyRelu", "Sigmoid": "Sigmoid", "Tanh": "Tanh", "HardSwish": "HardSwish",
                       "HardSigmoid": "HardSigmoid", "Swish": "Swish", "GeluErf": "GeluErf", "GeluTanh": "GeluTanh",
                       "GeluOp": "GeluErf", "GeluOpTanh": "GeluTanh"}
ACTIVATIONS = list(EXPECTED_ACTIVATION)


def epilogue_model(base_nodes, x_shape, y_shape, inits, bias=None, bias_shape=None, residual=False,
                   activation=None, opset=17):
    """base_nodes write 'P'; then Add(bias), Add(residual input R), activation; output Y."""
    rng = np.random.default_rng(1)
    nodes, cur = list(base_nodes), "P"
    inits = dict(inits)
    inputs = [("X", F32, list(x_shape))]
    if bias:
        inits["bias_add"] = rng.standard_normal(bias_shape).astype(np.float32)
        nodes.append(helper.make_node("Add", [cur, "bias_add"], ["PB"], name="bias"))
        cur = "PB"
    if residual:
        inputs.append(("R", F32, list(y_shape)))
        nodes.append(helper.make_node("Add", ["R", cur], ["PS"], name="residual"))
        cur = "PS"
    if activation:
        nodes += activation_nodes(activation, cur, "Y")
    else:
        nodes.append(helper.make_node("Identity", [cur], ["Y"]))
    if activation in ("GeluOp", "GeluOpTanh"):
        opset = 20
    return make_model(nodes, inputs, [("Y", F32, list(y_shape))], inits, opset=opset)


def conv_base(c, m, hw, k, stride=1, pad=0, group=1, dilation=1, conv_bias=True, rank=2, batch=2):
    rng = np.random.default_rng(0)
    inits = {"W": (rng.standard_normal((m, c // group) + (k,) * rank) * 0.3).astype(np.float32)}
    inputs = ["X", "W"]
    if conv_bias:
        inits["B"] = rng.standard_normal(m).astype(np.float32)
        inputs.append("B")
    node = helper.make_node("Conv", inputs, ["P"], pads=[pad] * (2 * rank), strides=[stride] * rank,
                            dilations=[dilation] * rank, group=group, name="conv")
    out = (hw + 2 * pad - dilation * (k - 1) - 1) // stride + 1
    return [node], (batch, c) + (hw,) * rank, (batch, m) + (out,) * rank, inits


def _feeds(model, seed=0):
    rng = np.random.default_rng(seed)
    return {i.name: (rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]) * 1.5
                     ).astype(np.float32) for i in model.graph.input}


def check_fused(model, fused_op, activation="", has_bias=None, has_sum=None):
    """The pass leaves exactly one fused node (plus folded Constants); the emulator matches
    onnxruntime on the unfused model in fp32 and fp16, and matches itself without fusion."""
    fused = run_pass(model, ["constant_folding", "eliminate_identity", "fuse_epilogue"])
    kinds = [(n.domain, n.op_type) for n in fused.graph.node]
    assert kinds == [(DOMAIN, fused_op)], kinds
    node = fused.graph.node[0]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert attrs.get("activation", b"").decode() == activation
    if has_bias is not None:
        assert (len(node.input) > 2 and node.input[2] != "") == has_bias
    if has_sum is not None:
        assert (len(node.input) > 3 and node.input[3] != "") == has_sum
    check_kernel_fusion_numerics(model, _feeds(model))


# --- every activation, with the bias and the residual sum --------------------------------------
@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("residual", [False, True])
def test_conv_bias_residual_activation(activation, residual):
    base, xs, ys, inits = conv_base(4, 6, 7, 3, pad=1)
    model = epilogue_model(base, xs, ys, inits, bias=True, bias_shape=(6, 1, 1), residual=residual,
                           activation=activation)
    check_fused(model, "FusedConv", EXPECTED_ACTIVATION[activation], has_bias=True, has_sum=residual)


# --- conv geometries: the kernel's three paths, groups, strides, pads, 1-D / 3-D ----------------
GEOMETRIES = {
    "pointwise": dict(c=8, m=16, hw=5, k=1),
    "im2col_stride2_pad": dict(c=4, m=8, hw=9, k=3, stride=2, pad=1),
    "im2col_dilated": dict(c=3, m=5, hw=9, k=3, dilation=2, pad=2),
    "grouped": dict(c=8, m=12, hw=6, k=3, group=4, pad=1),
    "depthwise_s1": dict(c=8, m=8, hw=10, k=3, group=8, pad=1),
    "depthwise_s2": dict(c=8, m=8, hw=11, k=3, group=8, stride=2, pad=1),
    "depthwise_5x5": dict(c=6, m=6, hw=9, k=5, group=6, pad=2),
    "conv1d": dict(c=4, m=6, hw=12, k=3, pad=1, rank=1),
    "conv3d": dict(c=2, m=4, hw=5, k=3, pad=1, rank=3),
    "no_conv_bias_batch1": dict(c=4, m=4, hw=6, k=3, pad=1, conv_bias=False, batch=1),
}


@pytest.mark.parametrize("geometry", list(GEOMETRIES))
@pytest.mark.parametrize("bias,residual", [(False, False), (True, False), (False, True), (True, True)])
def test_conv_geometries(geometry, bias, residual):
    g = dict(GEOMETRIES[geometry])
    base, xs, ys, inits = conv_base(**g)
    rank = g.get("rank", 2)
    model = epilogue_model(base, xs, ys, inits, bias=bias, bias_shape=(g["m"],) + (1,) * rank,
                           residual=residual, activation="Relu")
    conv_bias = g.get("conv_bias", True)
    check_fused(model, "FusedConv", "Relu", has_bias=bias or conv_bias, has_sum=residual)


def test_resnet_block_conv_bn_add_relu_is_one_fused_conv():
    """Conv -> BatchNormalization -> Add(shortcut) -> Relu: fold_batchnorm, then the fusion."""
    rng = np.random.default_rng(2)
    base, xs, ys, inits = conv_base(8, 8, 6, 3, pad=1)
    inits.update({"s": rng.uniform(0.5, 1.5, 8).astype(np.float32), "b": rng.standard_normal(8).astype(np.float32),
                  "mu": rng.standard_normal(8).astype(np.float32), "var": rng.uniform(0.5, 2, 8).astype(np.float32)})
    nodes = base + [helper.make_node("BatchNormalization", ["P", "s", "b", "mu", "var"], ["N"]),
                    helper.make_node("Add", ["N", "X"], ["S"]), helper.make_node("Relu", ["S"], ["Y"])]
    model = make_model(nodes, [("X", F32, list(xs))], [("Y", F32, list(ys))], inits)
    converted = Converter().convert(model)
    assert op_types(converted) == ["Conv", "Add", "Relu"]
    fused = run_pass(converted, "fuse_epilogue")
    assert op_types(fused) == ["FusedConv"] and list(fused.graph.node[0].input)[3] == "X"
    feeds = _feeds(model)
    want = ort_run(model, feeds)[0]
    got = ModelRunner(Compiler.compile(model), RuntimeConfig()).execute(feeds)["Y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))


# --- Gemm and MatMul ---------------------------------------------------------------------------
@pytest.mark.parametrize("activation", ["Relu", "GeluErf", "Swish", "Tanh"])
@pytest.mark.parametrize("with_c,bias_shape", [(True, (7,)), (False, (7,)), (True, None), (False, (3, 7))])
@pytest.mark.parametrize("residual", [False, True])
def test_gemm(activation, with_c, bias_shape, residual):
    rng = np.random.default_rng(3)
    inits = {"W": rng.standard_normal((7, 5)).astype(np.float32)}
    inputs = ["X", "W"]
    if with_c:
        inits["C"] = rng.standard_normal((1, 7)).astype(np.float32)
        inputs.append("C")
    base = [helper.make_node("Gemm", inputs, ["P"], transB=1, alpha=0.5, beta=2.0, name="gemm")]
    model = epilogue_model(base, (3, 5), (3, 7), inits, bias=bias_shape is not None, bias_shape=bias_shape,
                           residual=residual, activation=activation)
    check_fused(model, "FusedGemm", activation, has_bias=with_c or bias_shape is not None, has_sum=residual)


@pytest.mark.parametrize("activation", [None, "Relu", "GeluErf", "GeluTanh", "Swish", "Sigmoid"])
@pytest.mark.parametrize("a_shape", [(4, 6), (2, 3, 6), (6,)])
@pytest.mark.parametrize("residual", [False, True])
def test_matmul_bias_activation(activation, a_shape, residual):
    rng = np.random.default_rng(4)
    inits = {"W": rng.standard_normal((6, 5)).astype(np.float32)}
    base = [helper.make_node("MatMul", ["X", "W"], ["P"], name="dense")]
    y_shape = tuple(a_shape[:-1]) + (5,)
    model = epilogue_model(base, a_shape, y_shape, inits, bias=True, bias_shape=(5,), residual=residual,
                           activation=activation)
    check_fused(model, "FusedMatMul", EXPECTED_ACTIVATION[activation] if activation else "", has_bias=True,
                has_sum=residual)


# --- what must not be fused --------------------------------------------------------------------
def test_matmul_of_two_runtime_tensors_is_left_alone():
    nodes = [helper.make_node("MatMul", ["X", "Z"], ["P"]), helper.make_node("Relu", ["P"], ["Y"])]
    model = make_model(nodes, [("X", F32, [3, 4]), ("Z", F32, [4, 5])], [("Y", F32, [3, 5])])
    assert op_types(run_pass(model, "fuse_epilogue")) == ["MatMul", "Relu"]


def test_intermediate_graph_output_stops_the_fusion_there():
    base, xs, ys, inits = conv_base(4, 6, 7, 3, pad=1)
    model = epilogue_model(base, xs, ys, inits, bias=True, bias_shape=(6, 1, 1), activation="Relu")
    model.graph.output.append(helper.make_tensor_value_info("PB", F32, list(ys)))
    fused = run_pass(model, "fuse_epilogue")
    assert op_types(fused) == ["FusedConv", "Relu"]
    feeds = _feeds(model)
    want = ort_run(model, feeds)
    got = ModelRunner(Compiler.compile(model), RuntimeConfig()).execute(feeds)
    for name, w in zip(["Y", "PB"], want):
        np.testing.assert_allclose(got[name], w, rtol=1e-4, atol=1e-4)


def test_add_that_broadcasts_the_wrong_way_is_not_a_bias():
    base, xs, ys, inits = conv_base(4, 6, 6, 3, pad=1)  # output [2, 6, 6, 6]: a [6] Add runs along W
    model = epilogue_model(base, xs, ys, inits, bias=True, bias_shape=(6,), activation="Relu")
    fused = run_pass(model, "fuse_epilogue")
    assert op_types(fused) == ["Conv", "Add", "Relu"]


def test_residual_add_of_a_different_shape_is_not_a_sum():
    base, xs, ys, inits = conv_base(4, 6, 6, 3, pad=1)
    nodes = base + [helper.make_node("Add", ["P", "R"], ["Y"])]
    model = make_model(nodes, [("X", F32, list(xs)), ("R", F32, [1, 6, 6, 6])], [("Y", F32, list(ys))], inits)
    assert op_types(run_pass(model, "fuse_epilogue")) == ["Conv", "Add"]


def test_non_activation_chain_is_not_absorbed():
    base, xs, ys, inits = conv_base(4, 6, 6, 3, pad=1)
    nodes = base + [_const("two", 2.0), helper.make_node("Mul", ["P", "two"], ["M"]),
                    helper.make_node("Mul", ["P", "M"], ["Y"])]  # 2·x², close to nothing we know
    model = make_model(nodes, [("X", F32, list(xs))], [("Y", F32, list(ys))], inits)
    fused = run_pass(model, ["constant_folding", "fuse_epilogue"])
    assert op_types(fused) == ["Conv", "Mul", "Mul"]


def test_fused_steps_show_in_popef_dump():
    base, xs, ys, inits = conv_base(4, 6, 7, 3, pad=1)
    model = epilogue_model(base, xs, ys, inits, bias=True, bias_shape=(6, 1, 1), residual=True, activation="Relu6")
    from popef.dump import describe, render_text
    from popef.reader import PopefFile
    text = render_text(describe(PopefFile(Compiler.compile(model).to_bytes(), "model.popef")))
    (line,) = [ln for ln in text.splitlines() if "FusedConv" in ln]
    assert "'conv': X, W, " in line and ", R -> Y" in line
    assert 'activation="Clip"' in line and "activation_params=[0.0, 6.0]" in line
    assert "has_bias=1" in line and "has_sum=1" in line


@pytest.mark.parametrize("base", ["conv", "matmul", "gemm"])
def test_sum_before_bias_and_two_bias_adds_all_merge(base):
    """Adds commute: residual first, then two constant Adds, then the activation -> one node."""
    rng = np.random.default_rng(5)
    if base == "conv":
        nodes, xs, ys, inits = conv_base(4, 6, 6, 3, pad=1)
        bias_shape, fused_op = (6, 1, 1), "FusedConv"
    else:
        inits = {"W": rng.standard_normal((5, 6)).astype(np.float32)}
        op = helper.make_node("MatMul" if base == "matmul" else "Gemm", ["X", "W"], ["P"], name=base)
        nodes, xs, ys, bias_shape = [op], (3, 5), (3, 6), (6,)
        fused_op = "FusedMatMul" if base == "matmul" else "FusedGemm"
    inits.update({"b1": rng.standard_normal(bias_shape).astype(np.float32),
                  "b2": rng.standard_normal(bias_shape).astype(np.float32)})
    nodes = nodes + [helper.make_node("Add", ["P", "R"], ["S"]), helper.make_node("Add", ["b1", "S"], ["T"]),
                     helper.make_node("Add", ["T", "b2"], ["U"]), helper.make_node("Tanh", ["U"], ["Y"])]
    model = make_model(nodes, [("X", F32, list(xs)), ("R", F32, list(ys))], [("Y", F32, list(ys))], inits)
    check_fused(model, fused_op, "Tanh", has_bias=True, has_sum=True)
