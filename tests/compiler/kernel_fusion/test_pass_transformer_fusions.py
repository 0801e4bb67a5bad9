"""The transformer fusions of the kernel-fusion pipeline: hoist_matmul_reshape (Keras Dense's
Tensordot Reshape moved off the MatMul's output so bias + Gelu + residual fuse into
FusedMatMul) and fuse_layernorm (a decomposed last-axis or channel layer normalization -> one
LayerNormalization). Each case checks the graph after the passes, then compiles the original
model (the compile step runs the fusions) and compares the emulator with onnxruntime running
the original, unfused model, in fp32 and fp16; the forms are the node chains tf2onnx emits
for Keras (checked on a real Keras export at the end)."""
import numpy as np
import pytest
from onnx import helper, numpy_helper

from compiler import Compiler
from compiler.converter import Converter
from compiler.onnx_graph.internal_ops import DOMAIN
from compiler_test_helpers import F32, check_kernel_fusion_numerics, make_model, op_types, ort_run, run_pass
from tf_popef_op.runtime import ModelRunner, RuntimeConfig

FUSIONS = ["constant_folding", "fuse_layernorm", "hoist_matmul_reshape", "fuse_epilogue"]


def _const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value, np.float32)))


def gelu_nodes(kind, x, y):
    """The chains tf2onnx writes for keras.activations.gelu (Keras 3, TF 2.21)."""
    n = helper.make_node
    if kind == "erfc":  # approximate=False: 0.5·x·erfc(−x/√2), erfc(z) = 1 − erf(z)
        return [_const("g_half", 0.5), _const("g_rsqrt2", 1.0 / np.sqrt(2.0)), _const("g_one", 1.0),
                n("Mul", ["g_half", x], ["g_a"]), n("Neg", [x], ["g_n"]), n("Mul", ["g_n", "g_rsqrt2"], ["g_m"]),
                n("Erf", ["g_m"], ["g_e"]), n("Sub", ["g_one", "g_e"], ["g_c"]), n("Mul", ["g_a", "g_c"], [y])]
    if kind == "tanh":  # approximate=True
        return [_const("g_half", 0.5), _const("g_three", 3.0), _const("g_k", 0.044715),
                _const("g_s", np.sqrt(2.0 / np.pi)), _const("g_one", 1.0),
                n("Mul", ["g_half", x], ["g_a"]), n("Pow", [x, "g_three"], ["g_p"]), n("Mul", ["g_k", "g_p"], ["g_q"]),
                n("Add", [x, "g_q"], ["g_r"]), n("Mul", ["g_s", "g_r"], ["g_t"]), n("Tanh", ["g_t"], ["g_u"]),
                n("Add", ["g_one", "g_u"], ["g_v"]), n("Mul", ["g_a", "g_v"], [y])]
    raise ValueError(kind)


def layernorm_nodes(form, x, y, inner, rng):
    """Decomposed layer normalization of x over its last axis into y, and its constants."""
    n = helper.make_node
    gamma = rng.uniform(0.5, 1.5, inner).astype(np.float32)
    beta = rng.standard_normal(inner).astype(np.float32)
    if form == "keras":  # tf2onnx's Keras LayerNormalization: GlobalAveragePool as the mean (rank 3)
        nodes = [n("GlobalAveragePool", [x], ["ln_mean"]), n("Sub", [x, "ln_mean"], ["ln_d"]),
                 n("Mul", ["ln_d", "ln_d"], ["ln_sq"]), n("GlobalAveragePool", ["ln_sq"], ["ln_var"]),
                 n("Add", ["ln_var", "ln_eps"], ["ln_ve"]), n("Sqrt", ["ln_ve"], ["ln_s"]),
                 n("Reciprocal", ["ln_s"], ["ln_r"]), n("Mul", ["ln_r", "ln_gamma"], ["ln_m"]),
                 n("Mul", [x, "ln_m"], ["ln_xm"]), n("Neg", ["ln_mean"], ["ln_nm"]),
                 n("Mul", ["ln_nm", "ln_m"], ["ln_b"]), n("Add", ["ln_b", "ln_beta"], ["ln_c"]),
                 n("Add", ["ln_xm", "ln_c"], [y])]
        return nodes, {"ln_eps": np.float32(1e-3), "ln_gamma": gamma, "ln_beta": beta}
    if form in ("reducemean_pow_div", "no_affine"):  # (x − mean) / sqrt(var + eps) · gamma + beta
        nodes = [n("ReduceMean", [x], ["ln_mean"], axes=[-1]), n("Sub", [x, "ln_mean"], ["ln_d"]),
                 n("Pow", ["ln_d", "ln_two"], ["ln_sq"]), n("ReduceMean", ["ln_sq"], ["ln_var"], axes=[-1]),
                 n("Add", ["ln_eps", "ln_var"], ["ln_ve"]), n("Sqrt", ["ln_ve"], ["ln_s"]),
                 n("Div", ["ln_d", "ln_s"], ["ln_n" if form != "no_affine" else y])]
        inits = {"ln_eps": np.float32(1e-5), "ln_two": np.float32(2.0)}
        if form != "no_affine":
            nodes += [n("Mul", ["ln_n", "ln_gamma"], ["ln_g"]), n("Add", ["ln_g", "ln_beta"], [y])]
            inits.update({"ln_gamma": gamma.reshape(1, inner), "ln_beta": beta})
        return nodes, inits
    raise ValueError(form)


def _feeds(model, seed=0):
    rng = np.random.default_rng(seed)
    return {i.name: (rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]) * 1.5 + 0.5
                     ).astype(np.float32) for i in model.graph.input}


def check_numerics(model, fp16=True):
    """The emulator (fusions on) matches onnxruntime on the unfused model, and itself unfused."""
    check_kernel_fusion_numerics(model, _feeds(model), fp16)


def _fused_attrs(model):
    return [(n.op_type, {a.name: helper.get_attribute_value(a) for a in n.attribute})
            for n in model.graph.node if n.domain == DOMAIN]


# --- hoist_matmul_reshape + fuse_epilogue: Keras Dense on a 3-D input ---------------------------
def dense_model(gelu, bias=True, residual=False, input_reshape=True, batch=2, seq=5, k=6, n=7):
    """X [B, T, K] -> (Reshape [B·T, K]) -> MatMul W -> Reshape [B, T, N] -> bias -> Gelu -> (+R) -> Y."""
    rng = np.random.default_rng(0)
    inits = {"W": (rng.standard_normal((k, n)) * 0.5).astype(np.float32),
             "rows": np.asarray([-1, k], np.int64), "back": np.asarray([batch, seq, n], np.int64)}
    nodes, inputs = [], [("X", F32, [batch, seq, k] if input_reshape else [batch * seq, k])]
    a = "X"
    if input_reshape:
        nodes.append(helper.make_node("Reshape", ["X", "rows"], ["X2"], name="tensordot_reshape"))
        a = "X2"
    nodes += [helper.make_node("MatMul", [a, "W"], ["P"], name="dense"),
              helper.make_node("Reshape", ["P", "back"], ["P3"], name="tensordot")]
    cur = "P3"
    if bias:
        inits["b"] = rng.standard_normal(n).astype(np.float32)
        nodes.append(helper.make_node("Add", [cur, "b"], ["PB"], name="bias"))
        cur = "PB"
    if gelu:
        nodes += gelu_nodes(gelu, cur, "G")
        cur = "G"
    if residual:
        inputs.append(("R", F32, [batch, seq, n]))
        nodes.append(helper.make_node("Add", ["R", cur], ["S"], name="residual"))
        cur = "S"
    nodes.append(helper.make_node("Identity", [cur], ["Y"]))
    return make_model(nodes, inputs, [("Y", F32, [batch, seq, n])], inits, opset=17)


@pytest.mark.parametrize("gelu,activation", [("erfc", "GeluErf"), ("tanh", "GeluTanh")])
@pytest.mark.parametrize("input_reshape", [True, False])
def test_keras_dense_gelu_fuses_into_one_fused_matmul(gelu, activation, input_reshape):
    model = dense_model(gelu, input_reshape=input_reshape)
    fused = run_pass(model, FUSIONS + ["eliminate_identity"])
    (kind, attrs), = _fused_attrs(fused)
    assert kind == "FusedMatMul" and attrs["activation"].decode() == activation
    mm = [n for n in fused.graph.node if n.domain == DOMAIN][0]
    assert mm.input[2] != ""  # the bias went in too
    # The Tensordot input Reshape is bypassed (the MatMul reads X), or one is added on a 2-D input.
    assert op_types(fused) == (["FusedMatMul"] if input_reshape else ["Reshape", "FusedMatMul"])
    check_numerics(model)


def test_residual_after_the_reshape_becomes_the_sum():
    """BERT's second FFN Dense: MatMul -> Reshape -> Add(residual) is one FusedMatMul with a sum."""
    model = dense_model(None, bias=False, residual=True)
    fused = run_pass(model, FUSIONS + ["eliminate_identity"])
    assert op_types(fused) == ["FusedMatMul"] and fused.graph.node[0].input[3] == "R"
    check_numerics(model)


def test_reshape_that_changes_the_last_dim_stays():
    """Splitting heads (N -> [heads, N/heads]) is no row-wise reshape: nothing moves."""
    rng = np.random.default_rng(1)
    nodes = [helper.make_node("MatMul", ["X", "W"], ["P"]), helper.make_node("Reshape", ["P", "heads"], ["Y"])]
    model = make_model(nodes, [("X", F32, [2, 5, 6])], [("Y", F32, [2, 5, 2, 4])],
                       {"W": rng.standard_normal((6, 8)).astype(np.float32),
                        "heads": np.asarray([2, 5, 2, 4], np.int64)}, opset=17)
    assert op_types(run_pass(model, "hoist_matmul_reshape")) == ["MatMul", "Reshape"]


def test_matmul_output_read_elsewhere_is_not_moved():
    model = dense_model("erfc")
    model.graph.output.append(helper.make_tensor_value_info("P", F32, [10, 7]))
    moved = run_pass(model, "hoist_matmul_reshape")
    assert op_types(moved)[:3] == ["Reshape", "MatMul", "Reshape"]
    feeds = _feeds(model)
    want = ort_run(model, feeds)
    got = ModelRunner(Compiler.compile(model), RuntimeConfig()).execute(feeds)
    for name, w in zip(["Y", "P"], want):
        np.testing.assert_allclose(got[name], w, rtol=1e-4, atol=1e-4)


# --- fuse_layernorm ------------------------------------------------------------------------------
@pytest.mark.parametrize("form", ["keras", "reducemean_pow_div", "no_affine"])
def test_decomposed_layernorm_becomes_layernormalization(form):
    rng = np.random.default_rng(2)
    nodes, inits = layernorm_nodes(form, "X", "Y", 16, rng)
    model = make_model(nodes, [("X", F32, [2, 5, 16])], [("Y", F32, [2, 5, 16])], inits, opset=17)
    fused = run_pass(model, "fuse_layernorm")
    assert op_types(fused) == ["LayerNormalization"]
    node = fused.graph.node[0]
    eps = {a.name: helper.get_attribute_value(a) for a in node.attribute}["epsilon"]
    assert eps == pytest.approx(float(inits["ln_eps"]))
    check_numerics(model)


def test_layernorm_then_dense_gelu_dense_residual_is_three_kernels():
    """A transformer FFN block as tf2onnx writes it: LN -> Dense+Gelu -> Dense -> +LN output."""
    rng = np.random.default_rng(3)
    nodes, inits = layernorm_nodes("keras", "X", "H", 8, rng)
    inits.update({"W1": (rng.standard_normal((8, 12)) * 0.4).astype(np.float32),
                  "b1": rng.standard_normal(12).astype(np.float32),
                  "W2": (rng.standard_normal((12, 8)) * 0.4).astype(np.float32),
                  "rows8": np.asarray([-1, 8], np.int64), "rows12": np.asarray([-1, 12], np.int64),
                  "back12": np.asarray([2, 4, 12], np.int64), "back8": np.asarray([2, 4, 8], np.int64)})
    n = helper.make_node
    nodes += [n("Reshape", ["H", "rows8"], ["H2"]), n("MatMul", ["H2", "W1"], ["F1"]),
              n("Reshape", ["F1", "back12"], ["F13"]), n("Add", ["F13", "b1"], ["F1b"])]
    nodes += gelu_nodes("erfc", "F1b", "G")
    nodes += [n("Reshape", ["G", "rows12"], ["G2"]), n("MatMul", ["G2", "W2"], ["F2"]),
              n("Reshape", ["F2", "back8"], ["F23"]), n("Add", ["H", "F23"], ["Y"])]
    model = make_model(nodes, [("X", F32, [2, 4, 8])], [("Y", F32, [2, 4, 8])], inits, opset=17)
    fused = run_pass(model, FUSIONS)
    assert op_types(fused) == ["LayerNormalization", "FusedMatMul", "FusedMatMul"]
    check_numerics(model)


def test_layernorm_over_a_middle_axis_is_left_alone():
    """Axis 2 of [N, C, H, W] is neither the channels nor the last axis."""
    rng = np.random.default_rng(4)
    nodes, inits = layernorm_nodes("reducemean_pow_div", "X", "Y", 16, rng)
    for node in nodes:
        if node.op_type == "ReduceMean":
            del node.attribute[:]
            node.attribute.append(helper.make_attribute("axes", [2]))
    inits["ln_gamma"] = inits["ln_gamma"].reshape(16, 1)
    inits["ln_beta"] = inits["ln_beta"].reshape(16, 1)
    model = make_model(nodes, [("X", F32, [2, 3, 16, 4])], [("Y", F32, [2, 3, 16, 4])], inits, opset=17)
    assert "LayerNormalization" not in op_types(run_pass(model, "fuse_layernorm"))


def channel_layernorm_nodes(x, y, channels, rng, beta=True):
    """ConvNeXt's LayerNorm over the channels of an NCHW tensor as tf2onnx writes it (Keras
    LayerNormalization on NHWC with the layout transposes pushed to the convolution)."""
    n = helper.make_node
    nodes = [n("ReduceMean", [x], ["cn_mean"], axes=[1]), n("Neg", ["cn_mean"], ["cn_nm"]),
             n("Sub", [x, "cn_mean"], ["cn_d"]), n("Mul", ["cn_d", "cn_d"], ["cn_sq"]),
             n("ReduceMean", ["cn_sq"], ["cn_var"], axes=[1]), n("Add", ["cn_var", "cn_eps"], ["cn_ve"]),
             n("Sqrt", ["cn_ve"], ["cn_s"]), n("Reciprocal", ["cn_s"], ["cn_r"]),
             n("Mul", ["cn_r", "cn_gamma"], ["cn_m"]), n("Mul", [x, "cn_m"], ["cn_xm"]),
             n("Mul", ["cn_nm", "cn_m"], ["cn_b"])]
    inits = {"cn_eps": np.full((1, 1, 1, 1), 1e-6, np.float32),
             "cn_gamma": rng.uniform(0.5, 1.5, (1, channels, 1, 1)).astype(np.float32)}
    if beta:
        nodes += [n("Add", ["cn_b", "cn_beta"], ["cn_c"]), n("Add", ["cn_xm", "cn_c"], [y])]
        inits["cn_beta"] = rng.standard_normal((1, channels, 1, 1)).astype(np.float32)
    else:
        nodes += [n("Add", ["cn_xm", "cn_b"], [y])]
    return nodes, inits


@pytest.mark.parametrize("beta", [True, False])
def test_channel_layernorm_becomes_layernormalization_between_transposes(beta):
    rng = np.random.default_rng(7)
    nodes, inits = channel_layernorm_nodes("X", "Y", 16, rng, beta)
    model = make_model(nodes, [("X", F32, [2, 16, 3, 5])], [("Y", F32, [2, 16, 3, 5])], inits, opset=17)
    fused = run_pass(model, "fuse_layernorm")
    assert op_types(fused) == ["Transpose", "LayerNormalization", "Transpose"]
    perms = [list(helper.get_attribute_value(n.attribute[0])) for n in fused.graph.node if n.op_type == "Transpose"]
    assert perms == [[0, 2, 3, 1], [0, 3, 1, 2]]
    check_numerics(model)


def test_channel_layernorm_into_a_channels_last_transpose_writes_it():
    """ConvNeXt's block: the normalized NCHW tensor goes channels last into the pointwise
    MatMul; the LayerNormalization writes that Transpose's output (one Transpose, not three)."""
    rng = np.random.default_rng(8)
    nodes, inits = channel_layernorm_nodes("X", "H", 8, rng)
    nodes += [helper.make_node("Transpose", ["H"], ["T"], perm=[0, 2, 3, 1]),
              helper.make_node("MatMul", ["T", "W"], ["Y"])]
    inits["W"] = (rng.standard_normal((8, 12)) * 0.4).astype(np.float32)
    model = make_model(nodes, [("X", F32, [2, 8, 4, 6])], [("Y", F32, [2, 4, 6, 12])], inits, opset=17)
    fused = run_pass(model, "fuse_layernorm")
    assert op_types(fused) == ["Transpose", "LayerNormalization", "MatMul"]
    assert fused.graph.node[1].output[0] == "T"
    check_numerics(model)


def test_channel_layernorm_read_twice_keeps_its_transpose_back():
    """A second reader of the normalized NCHW tensor still gets it: the channels-last Transpose
    after it is not cancelled."""
    rng = np.random.default_rng(9)
    nodes, inits = channel_layernorm_nodes("X", "H", 8, rng)
    nodes += [helper.make_node("Transpose", ["H"], ["Y"], perm=[0, 2, 3, 1]),
              helper.make_node("Relu", ["H"], ["Z"])]
    model = make_model(nodes, [("X", F32, [1, 8, 4, 6])], [("Y", F32, [1, 4, 6, 8]), ("Z", F32, [1, 8, 4, 6])],
                       inits, opset=17)
    fused = run_pass(model, "fuse_layernorm")
    assert op_types(fused) == ["Transpose", "LayerNormalization", "Transpose", "Transpose", "Relu"]
    feeds = _feeds(model)
    got = ModelRunner(Compiler.compile(model), RuntimeConfig()).execute(feeds)
    for name, want in zip(["Y", "Z"], ort_run(model, feeds)):
        np.testing.assert_allclose(got[name], want, rtol=1e-4, atol=1e-4)


def test_layernorm_stops_at_an_intermediate_graph_output():
    """The normalized tensor is also a graph output: the LayerNormalization writes it (gamma 1,
    beta 0) and the affine Mul/Add stay after it, so both outputs keep their values."""
    rng = np.random.default_rng(5)
    nodes, inits = layernorm_nodes("reducemean_pow_div", "X", "Y", 16, rng)
    model = make_model(nodes, [("X", F32, [2, 5, 16])], [("Y", F32, [2, 5, 16]), ("ln_n", F32, [2, 5, 16])],
                       inits, opset=17)
    fused = run_pass(model, "fuse_layernorm")
    assert op_types(fused) == ["LayerNormalization", "Mul", "Add"] and fused.graph.node[0].output[0] == "ln_n"
    feeds = _feeds(model)
    got = ModelRunner(Compiler.compile(model), RuntimeConfig()).execute(feeds)
    for name, want in zip(["Y", "ln_n"], ort_run(model, feeds)):
        np.testing.assert_allclose(got[name], want, rtol=1e-4, atol=1e-4)


def test_something_else_shaped_like_a_layernorm_is_left_alone():
    """Same anchor (mean, variance) but the tail scales by sqrt(var + eps): not a normalization."""
    n = helper.make_node
    nodes = [n("ReduceMean", ["X"], ["mean"], axes=[-1]), n("Sub", ["X", "mean"], ["d"]),
             n("Mul", ["d", "d"], ["sq"]), n("ReduceMean", ["sq"], ["var"], axes=[-1]),
             n("Add", ["var", "eps"], ["ve"]), n("Sqrt", ["ve"], ["s"]), n("Mul", ["d", "s"], ["Y"])]
    model = make_model(nodes, [("X", F32, [3, 8])], [("Y", F32, [3, 8])], {"eps": np.float32(1e-5)}, opset=17)
    assert "LayerNormalization" not in op_types(run_pass(model, "fuse_layernorm"))


def test_opset_below_17_is_left_alone():
    rng = np.random.default_rng(6)
    nodes, inits = layernorm_nodes("reducemean_pow_div", "X", "Y", 16, rng)
    model = make_model(nodes, [("X", F32, [2, 5, 16])], [("Y", F32, [2, 5, 16])], inits, opset=13)
    assert "LayerNormalization" not in op_types(run_pass(model, "fuse_layernorm"))
    check_numerics(model, fp16=False)


# --- the real exports --------------------------------------------------------------------------
@pytest.mark.parametrize("approximate,activation", [(False, "GeluErf"), (True, "GeluTanh")])
def test_keras_dense_gelu_layernorm_export(tmp_path, approximate, activation):
    """A Keras Dense(gelu) + LayerNormalization exported by tf2onnx: one FusedMatMul with the
    Gelu and bias, one LayerNormalization; the emulator matches TensorFlow."""
    import keras
    import tensorflow as tf
    from compiler.kernel_fusion import run_kernel_fusions
    from compiler.frontends import tensorflow_to_onnx
    keras.utils.set_random_seed(0)
    x = keras.Input((8, 16))
    h = keras.layers.Dense(32, activation=lambda t: keras.activations.gelu(t, approximate=approximate),
                           bias_initializer="random_normal")(x)
    h = keras.layers.LayerNormalization(epsilon=1e-5, beta_initializer="random_normal",
                                        gamma_initializer="random_normal")(h)
    path = str(tmp_path / "m")
    keras.Model(x, h).export(path, verbose=False)
    converted = Converter(batch_size=2).convert(tensorflow_to_onnx(path))
    fused = run_kernel_fusions(converted)
    kinds = [(n.op_type, {a.name: helper.get_attribute_value(a) for a in n.attribute}.get("activation"))
             for n in fused.graph.node]
    assert kinds == [("FusedMatMul", activation.encode()), ("LayerNormalization", None)], kinds
    sample = np.random.default_rng(0).standard_normal((2, 8, 16)).astype(np.float32)
    signature = tf.saved_model.load(path).signatures["serving_default"]
    (want,) = [v.numpy() for v in signature(tf.constant(sample)).values()]
    got = list(ModelRunner(Compiler.compile(converted), RuntimeConfig()).execute(
        {converted.graph.input[0].name: sample}).values())[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))


# --- fold_scale_into_matmul ----------------------------------------------------------------------
def attention_scores_model(scale_op="Mul", q_bias=False, shared_weight=False, extra_reader=None):
    """X [1, T, D] -> Q = X·Wq (+bq) -> heads [1, H, T, d] ; K likewise from X·Wk ; Q·Kᵀ, scaled by
    1/√d (Mul or Div), Softmax -> Y; optionally Wq also used elsewhere, `extra_reader` also an output."""
    rng = np.random.default_rng(7)
    t, d_model, heads = 6, 8, 2
    d = d_model // heads
    inits = {"Wq": rng.standard_normal((d_model, d_model)).astype(np.float32),
             "Wk": rng.standard_normal((d_model, d_model)).astype(np.float32),
             "split": np.asarray([1, t, heads, d], np.int64),
             "s": np.float32(1.0 / np.sqrt(d) if scale_op == "Mul" else np.sqrt(d))}
    n = helper.make_node
    nodes = [n("MatMul", ["X", "Wq"], ["q0"])]
    q = "q0"
    if q_bias:
        inits["bq"] = rng.standard_normal(d_model).astype(np.float32)
        nodes.append(n("Add", ["bq", q], ["q1"]))
        q = "q1"
    nodes += [n("Reshape", [q, "split"], ["q2"]), n("Transpose", ["q2"], ["q3"], perm=[0, 2, 1, 3]),
              n("MatMul", ["X", "Wk"], ["k0"]), n("Reshape", ["k0", "split"], ["k1"]),
              n("Transpose", ["k1"], ["k2"], perm=[0, 2, 3, 1]),
              n("MatMul", ["q3", "k2"], ["scores"]), n(scale_op, ["scores", "s"], ["scaled"]),
              n("Softmax", ["scaled"], ["Y"], axis=-1)]
    outputs = [("Y", F32, [1, heads, t, t])]
    if shared_weight:
        nodes.append(n("MatMul", ["X", "Wq"], ["Z"]))
        outputs.append(("Z", F32, [1, t, d_model]))
    if extra_reader == "q3":
        outputs.append(("q3", F32, [1, heads, t, d]))
    elif extra_reader == "scores":
        outputs.append(("scores", F32, [1, heads, t, t]))
    return make_model(nodes, [("X", F32, [1, t, d_model])], outputs, inits, opset=17)


def _check_all_outputs(model):
    feeds = _feeds(model)
    got = ModelRunner(Compiler.compile(model), RuntimeConfig()).execute(feeds)
    for out, want in zip(model.graph.output, ort_run(model, feeds)):
        np.testing.assert_allclose(got[out.name], want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("scale_op", ["Mul", "Div"])
@pytest.mark.parametrize("q_bias", [False, True])
def test_attention_scale_folds_into_the_query_weights(scale_op, q_bias):
    model = attention_scores_model(scale_op, q_bias)
    folded = run_pass(model, "fold_scale_into_matmul")
    assert scale_op not in op_types(folded)
    _check_all_outputs(model)


def test_shared_weights_get_a_scaled_copy():
    model = attention_scores_model(shared_weight=True)
    folded = run_pass(model, "fold_scale_into_matmul")
    assert "Mul" not in op_types(folded)
    matmuls = [x for x in folded.graph.node if x.op_type == "MatMul" and x.input[0] == "X"]
    assert sorted(x.input[1] for x in matmuls) == ["Wk", "Wq", "Wq_scaled"]
    _check_all_outputs(model)


def test_scale_of_a_tensor_read_elsewhere_stays():
    model = attention_scores_model(extra_reader="scores")
    assert "Mul" in op_types(run_pass(model, "fold_scale_into_matmul"))
    _check_all_outputs(model)


def test_query_read_elsewhere_puts_the_scale_into_the_keys():
    """Q·Kᵀ is linear in either operand: with Q also a graph output, Wk takes the scale."""
    model = attention_scores_model(extra_reader="q3")
    folded = run_pass(model, "fold_scale_into_matmul")
    assert "Mul" not in op_types(folded)
    assert sorted(x.input[1] for x in folded.graph.node if x.op_type == "MatMul" and x.input[0] == "X") == \
        ["Wk_scaled", "Wq"]
    _check_all_outputs(model)


def test_scale_with_no_constant_weights_behind_it_stays():
    n = helper.make_node
    nodes = [n("MatMul", ["A", "B"], ["P"]), n("Mul", ["P", "s"], ["Y"])]
    model = make_model(nodes, [("A", F32, [3, 4]), ("B", F32, [4, 5])], [("Y", F32, [3, 5])],
                       {"s": np.float32(0.5)}, opset=17)
    assert op_types(run_pass(model, "fold_scale_into_matmul")) == ["MatMul", "Mul"]


def test_small_bert_through_the_whole_compiler(tmp_path):
    """The Keras BERT of tests/models at heads 2, hidden 64, 1 layer, seq 32 (the small
    variant the benchmarks cache), exported by tf2onnx: after the kernel fusions no Erf, scale
    Mul or decomposed LayerNorm is left, and the emulator matches TensorFlow (1e-4 of the
    output's size) and onnxruntime on the original graph."""
    import os
    import sys
    import keras
    from compiler.kernel_fusion import run_kernel_fusions
    models_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models")
    sys.path.insert(0, os.path.abspath(models_dir))
    try:
        from architecture_checks import export
        from keras_architectures import bert_encoder, sample_ids
    finally:
        sys.path.pop(0)
    keras.utils.set_random_seed(0)
    exported = export("bert_small", bert_encoder(layers=1, hidden=64, heads=2, seq_len=32), sample_ids(2, 32),
                      str(tmp_path))
    converted = Converter(batch_size=2).convert(exported.onnx)
    fused = run_kernel_fusions(converted)
    kinds = op_types(fused)
    assert "Erf" not in kinds and "GlobalAveragePool" not in kinds and "Reciprocal" not in kinds
    assert kinds.count("LayerNormalization") == 3 and kinds.count("FusedMatMul") >= 3
    assert all(x.op_type != "Mul" or fused_type(fused, x.output[0]) != "float" for x in fused.graph.node)
    feeds = {converted.graph.input[0].name: exported.inputs}
    got = ModelRunner(Compiler.compile(converted), RuntimeConfig()).execute(feeds)
    reference = ort_run(exported.onnx, feeds)
    for i, out in enumerate(exported.onnx.graph.output):
        want = exported.reference[out.name]
        scale = float(np.abs(want).max())
        np.testing.assert_allclose(got[out.name], want, rtol=0, atol=1e-4 * scale)
        np.testing.assert_allclose(got[out.name], reference[i], rtol=0, atol=1e-4 * scale)


def fused_type(model, tensor):
    """'float' if `tensor` is float32/float16 in `model` (by shape inference), else its dtype name."""
    from compiler.onnx_graph.type_inference import infer_types
    t = infer_types(model).types.get(tensor)
    return "float" if t is not None and t.elem_type in (1, 10) else (t.dtype_name if t else "?")


# --- merge_transposes_across_unit_reshape ---------------------------------------------------------
def transposes_model(x_shape, perm1, mid_shape, perm2):
    n = helper.make_node
    mid = np.asarray(mid_shape, np.int64)
    t1 = [x_shape[p] for p in perm1]
    out = [mid_shape[p] for p in perm2]
    nodes = [n("Relu", ["X"], ["r"]), n("Transpose", ["r"], ["t1"], perm=perm1), n("Reshape", ["t1", "mid"], ["m"]),
             n("Transpose", ["m"], ["t2"], perm=perm2), n("Relu", ["t2"], ["Y"])]
    assert int(np.prod(t1)) == int(np.prod(mid))
    return make_model(nodes, [("X", F32, list(x_shape))], [("Y", F32, out)], {"mid": mid}, opset=17)


@pytest.mark.parametrize("case", ["keys", "values"])
def test_attention_transpose_pairs_become_one(case):
    """The keys' and values' paths of tf2onnx's einsum attention (heads 2, T 8, d 4)."""
    if case == "keys":  # [1, 1, T, H, d] -> [1, H, 1, T, d] -> [H, T, d] -> [H, d, T]
        model = transposes_model([1, 1, 8, 2, 4], [0, 3, 1, 2, 4], [2, 8, 4], [0, 2, 1])
    else:  # [1, T, 1, H, d] -> [1, H, 1, d, T] -> [H, d, T] -> [H, T, d]
        model = transposes_model([1, 8, 1, 2, 4], [0, 3, 2, 4, 1], [2, 4, 8], [0, 2, 1])
    merged = run_pass(model, "merge_transposes_across_unit_reshape")
    assert op_types(merged) == ["Relu", "Reshape", "Transpose", "Reshape", "Relu"]
    _check_all_outputs(model)


def test_transposes_that_cancel_leave_one_reshape():
    model = transposes_model([1, 8, 1, 3], [0, 3, 1, 2], [3, 8], [1, 0])  # [1,3,8,1] -> [3,8] -> [8,3]
    merged = run_pass(model, "merge_transposes_across_unit_reshape")
    assert op_types(merged) == ["Relu", "Reshape", "Relu"]
    _check_all_outputs(model)


def test_reshape_that_merges_axes_keeps_both_transposes():
    model = transposes_model([2, 3, 4], [1, 0, 2], [6, 4], [1, 0])  # [3,2,4] -> [6,4]: merges 3 and 2
    assert op_types(run_pass(model, "merge_transposes_across_unit_reshape")) == \
        ["Relu", "Transpose", "Reshape", "Transpose", "Relu"]
