"""fold_conv_affine: per-channel Mul/Add/Sub/Div by constants after Conv / ConvTranspose / Gemm /
MatMul disappear into the producer's weights and bias (tf2onnx's form of a depthwise layer's
BatchNorm). The graph after the pass is checked against onnxruntime running the original
model (fp32), then the original is converted with the default pipeline, compiled and run on the
emulator in fp32 and fp16; negative cases check what must be left alone."""
import numpy as np
import pytest
from onnx import helper, numpy_helper

from compiler import Compiler
from compiler.converter import Converter
from compiler.kernel_fusion import run_kernel_fusions
from compiler_test_helpers import F32, make_model, op_types, ort_run, random_feeds, run_pass
from tf_popef_op.runtime import ModelRunner, RuntimeConfig

RNG = np.random.default_rng(0)
N, C, M, H = 2, 4, 8, 6


def _per_channel(shape):
    return RNG.uniform(0.5, 1.5, shape).astype(np.float32) * RNG.choice([-1.0, 1.0], shape).astype(np.float32)


def conv_then(chain, group=1, bias=True, consts=None, extra_nodes=(), out_shape=None):
    """Conv(X) followed by `chain`: (op, constant name, x first?) triples writing C0 -> C1 -> ... -> Y."""
    inits = {"W": RNG.standard_normal((M, C // group, 3, 3)).astype(np.float32), **(consts or {})}
    inputs = ["X", "W"]
    if bias:
        inits["B"] = RNG.standard_normal(M).astype(np.float32)
        inputs.append("B")
    nodes = [helper.make_node("Conv", inputs, ["C0"], pads=[1, 1, 1, 1], group=group, name="conv")]
    nodes += _chain_nodes(chain, "C0")
    nodes += list(extra_nodes)
    return make_model(nodes, [("X", F32, [N, C, H, H])], [("Y", F32, out_shape or [N, M, H, H])], inits)


def _chain_nodes(chain, first):
    nodes, cur = [], first
    for i, (op, const, x_first) in enumerate(chain):
        out = "Y" if i == len(chain) - 1 else f"C{i + 1}"
        nodes.append(helper.make_node(op, [cur, const] if x_first else [const, cur], [out], name=f"{op}_{i}"))
        cur = out
    return nodes


def _check(model, expected_ops, out="Y", fused_ops=None):
    feeds = random_feeds(model)
    want = ort_run(model, feeds)[0]
    folded = run_pass(model, ["fold_conv_affine", "dead_code_elimination", "eliminate_unused_initializers"])
    assert op_types(folded) == expected_ops
    np.testing.assert_allclose(ort_run(folded, feeds)[0], want, rtol=1e-5, atol=1e-5)
    again = run_pass(folded, "fold_conv_affine")  # idempotent: a second run changes nothing
    assert again.graph == folded.graph
    for precision, tol in (("fp32", 1e-4), ("fp16", 2e-2)):
        converted = Converter(precision=precision).convert(model)
        assert op_types(converted) == expected_ops
        if fused_ops is not None:
            assert op_types(run_kernel_fusions(converted)) == fused_ops
        f = {k: v.astype(np.float16) if precision == "fp16" else v for k, v in feeds.items()}
        got = ModelRunner(Compiler.compile(converted), RuntimeConfig()).execute(f)[out].astype(np.float32)
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, float(np.abs(want).max())))


def _check_every_output(model, expected_ops):
    """fold_conv_affine alone on a model with several outputs: the op types, and every output
    against onnxruntime on the original."""
    feeds = random_feeds(model)
    want = ort_run(model, feeds)
    folded = run_pass(model, "fold_conv_affine")
    assert op_types(folded) == expected_ops
    for w, g in zip(want, ort_run(folded, feeds)):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


# --- folds ------------------------------------------------------------------------------------
@pytest.mark.parametrize("group", [1, C])  # C: depthwise (M = 2·C channels, two per group)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(1, M, 1, 1), (M, 1, 1)])
def test_conv_mul_add_becomes_one_conv(group, bias, shape):
    consts = {"s": _per_channel(shape), "t": RNG.standard_normal(shape).astype(np.float32)}
    _check(conv_then([("Mul", "s", True), ("Add", "t", True)], group=group, bias=bias, consts=consts), ["Conv"])


@pytest.mark.parametrize("chain", [
    [("Add", "t", False), ("Mul", "s", False)],                      # other order, constant first
    [("Sub", "t", True), ("Div", "s", True)],                        # x - t, then / s
    [("Sub", "t", False), ("Mul", "s", True)],                       # t - x negates the scale
    [("Mul", "k", True), ("Add", "t", True), ("Mul", "s", True), ("Sub", "k", True)],  # scalar k, long chain
])
def test_any_chain_of_per_channel_and_scalar_constants_folds(chain):
    consts = {"s": _per_channel((1, M, 1, 1)), "t": RNG.standard_normal((M, 1, 1)).astype(np.float32),
              "k": np.array(0.75, np.float32)}
    _check(conv_then(chain, consts=consts), ["Conv"])


def test_constant_nodes_and_lone_scalar_mul_fold():
    nodes = [helper.make_node("Constant", [], ["s"], value=numpy_helper.from_array(np.array([2.5], np.float32)))]
    model = conv_then([("Mul", "s", True)], bias=False, extra_nodes=nodes)
    _check(model, ["Conv"])


def test_depthwise_bn_as_mul_add_then_relu6_fuses_into_one_conv_kernel():
    # MobileNetV2's depthwise block as tf2onnx writes it: Conv (no bias) -> Mul -> Add -> Clip(0, 6).
    consts = {"s": _per_channel((1, M, 1, 1)), "t": RNG.standard_normal((1, M, 1, 1)).astype(np.float32),
              "lo": np.array(0.0, np.float32), "hi": np.array(6.0, np.float32)}
    model = conv_then([("Mul", "s", True), ("Add", "t", True)], group=C, bias=False, consts=consts)
    model.graph.node[-1].output[0] = "BN"
    model.graph.node.append(helper.make_node("Clip", ["BN", "lo", "hi"], ["Y"], name="relu6"))
    _check(model, ["Conv", "Clip"], fused_ops=["FusedConv"])


def test_conv_transpose_with_groups():
    inits = {"W": RNG.standard_normal((4, 3, 3, 3)).astype(np.float32), "s": _per_channel((1, 6, 1, 1)),
             "t": RNG.standard_normal((6, 1, 1)).astype(np.float32)}
    nodes = [helper.make_node("ConvTranspose", ["X", "W"], ["C0"], strides=[2, 2], group=2, name="deconv")]
    nodes += _chain_nodes([("Mul", "s", True), ("Add", "t", True)], "C0")
    model = make_model(nodes, [("X", F32, [1, 4, 5, 5])], [("Y", F32, [1, 6, 11, 11])], inits)
    _check(model, ["ConvTranspose"])


@pytest.mark.parametrize("trans_b", [False, True])
@pytest.mark.parametrize("c_shape", [None, (7,), (3, 7), (3, 1)])
def test_gemm_folds_into_b_and_c(trans_b, c_shape):
    k, m = 5, 7
    inits = {"W": RNG.standard_normal((m, k) if trans_b else (k, m)).astype(np.float32), "s": _per_channel((m,)),
             "t": RNG.standard_normal((1, m)).astype(np.float32)}
    inputs = ["X", "W"]
    if c_shape is not None:
        inits["Cb"] = RNG.standard_normal(c_shape).astype(np.float32)
        inputs.append("Cb")
    nodes = [helper.make_node("Gemm", inputs, ["C0"], transB=int(trans_b), alpha=0.7, beta=1.3, name="gemm")]
    nodes += _chain_nodes([("Div", "s", True), ("Add", "t", False)], "C0")
    _check(make_model(nodes, [("X", F32, [3, k])], [("Y", F32, [3, m])], inits), ["Gemm"])


@pytest.mark.parametrize("chain, expected, fused", [
    ([("Mul", "s", True), ("Add", "t", True)], ["MatMul", "Add"], ["FusedMatMul"]),  # the shift: a bias later
    ([("Mul", "s", True)], ["MatMul"], ["MatMul"]),
])
def test_matmul_on_3d_input_scales_its_weights(chain, expected, fused):
    inits = {"W": RNG.standard_normal((5, 7)).astype(np.float32), "s": _per_channel((7,)),
             "t": RNG.standard_normal((1, 1, 7)).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["X", "W"], ["C0"], name="mm")] + _chain_nodes(chain, "C0")
    _check(make_model(nodes, [("X", F32, [2, 3, 5])], [("Y", F32, [2, 3, 7])], inits), expected, fused_ops=fused)


def test_folded_weights_are_new_tensors_so_shared_weights_stay_intact():
    consts = {"s": _per_channel((1, M, 1, 1))}
    model = conv_then([("Mul", "s", True)], consts=consts)
    model.graph.node.append(helper.make_node("Conv", ["X", "W", "B"], ["Z"], pads=[1, 1, 1, 1], name="other"))
    model.graph.output.append(helper.make_tensor_value_info("Z", F32, [N, M, H, H]))
    _check_every_output(model, ["Conv", "Conv"])


def test_chain_stops_at_a_tensor_with_another_reader():
    # Conv -> Mul -> Add where the Mul's output is also a graph output: the Mul folds, the Add stays.
    consts = {"s": _per_channel((1, M, 1, 1)), "t": RNG.standard_normal((1, M, 1, 1)).astype(np.float32)}
    model = conv_then([("Mul", "s", True), ("Add", "t", True)], consts=consts)
    model.graph.output.append(helper.make_tensor_value_info("C1", F32, [N, M, H, H]))
    _check_every_output(model, ["Conv", "Add"])


# --- left alone ---------------------------------------------------------------------------------
def _unchanged(model):
    folded = run_pass(model, "fold_conv_affine")
    assert op_types(folded) == op_types(model)
    assert folded.graph == model.graph


@pytest.mark.parametrize("shape", [(1, 1, H, H), (1, M, H, H), (N, M, 1, 1), (1, 1, M, 1, 1)])
def test_constant_that_is_not_per_channel_stays(shape):
    _unchanged(conv_then([("Mul", "s", True)], consts={"s": _per_channel(shape)},
                         out_shape=[1, N, M, H, H] if len(shape) == 5 else None))


def test_conv_output_with_another_reader_stays():
    model = conv_then([("Mul", "s", True)], consts={"s": _per_channel((1, M, 1, 1))})
    model.graph.output.append(helper.make_tensor_value_info("C0", F32, [N, M, H, H]))
    _unchanged(model)
    model = conv_then([("Mul", "s", True)], consts={"s": _per_channel((1, M, 1, 1))},
                      extra_nodes=[helper.make_node("Relu", ["C0"], ["R"])])
    model.graph.output.append(helper.make_tensor_value_info("R", F32, [N, M, H, H]))
    _unchanged(model)


def test_dynamic_shapes_stay():
    model = conv_then([("Mul", "s", True)], consts={"s": _per_channel((1, M, 1, 1))})
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    model.graph.output[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    _unchanged(model)


def test_non_affine_or_unsafe_constants_stay():
    s = _per_channel((1, M, 1, 1))
    _unchanged(conv_then([("Div", "s", False)], consts={"s": s}))  # s / x
    s0 = s.copy()
    s0[0, 3] = 0.0
    _unchanged(conv_then([("Div", "s", True)], consts={"s": s0}))  # division by zero
    sinf = s.copy()
    sinf[0, 1] = np.inf
    _unchanged(conv_then([("Mul", "s", True)], consts={"s": sinf}))


def test_run_time_operand_or_weights_stay():
    model = conv_then([("Mul", "S", True)])
    model.graph.input.append(helper.make_tensor_value_info("S", F32, [1, M, 1, 1]))
    _unchanged(model)
    model = conv_then([("Mul", "s", True)], consts={"s": _per_channel((1, M, 1, 1))})
    del model.graph.initializer[[t.name for t in model.graph.initializer].index("W")]
    model.graph.input.append(helper.make_tensor_value_info("W", F32, [M, C, 3, 3]))
    _unchanged(model)


def test_matmul_followed_only_by_adds_is_left_to_fuse_epilogue():
    inits = {"W": RNG.standard_normal((5, 7)).astype(np.float32), "t": RNG.standard_normal(7).astype(np.float32)}
    nodes = [helper.make_node("MatMul", ["X", "W"], ["C0"])] + _chain_nodes([("Add", "t", True)], "C0")
    _unchanged(make_model(nodes, [("X", F32, [3, 5])], [("Y", F32, [3, 7])], inits))


def test_runs_in_the_default_pipeline_before_float_to_half():
    from compiler.converter.pipeline import DEFAULT_PIPELINE
    assert DEFAULT_PIPELINE.index("fold_batchnorm") < DEFAULT_PIPELINE.index("fold_conv_affine") \
        < DEFAULT_PIPELINE.index("float_to_half")


def test_shift_only_goes_into_the_bias_and_keeps_the_weights_tensor():
    model = conv_then([("Add", "t", True), ("Sub", "u", True)],
                      consts={"t": RNG.standard_normal((M, 1, 1)).astype(np.float32), "u": np.float32(0.5)})
    _check(model, ["Conv"])
    assert run_pass(model, "fold_conv_affine").graph.node[0].input[1] == "W"


def test_a_declared_channel_count_beyond_the_weights_allocates_nothing():
    # Gemm of a rank-3 input cannot be typed, so its output keeps the declared [2^62] shape;
    # the pass must not size its per-channel vectors from it.
    model = make_model([helper.make_node("Add", ["X", "Y"], ["Z"]), helper.make_node("Gemm", ["Z", "C"], ["O"])],
                       [("X", F32, [1, 2]), ("Y", F32, [1, 2, 3])], [("O", F32, [1 << 62])],
                       {"C": np.ones((2, 4), np.float32)})
    assert run_pass(model, "fold_conv_affine") == model


def test_a_declared_output_without_the_channel_axis_is_left_alone():
    # The Conv's input cannot be typed, so its output keeps the declared rank-1 shape, which
    # has no channel axis 1.
    model = make_model([helper.make_node("Add", ["X", "Y"], ["Z"]), helper.make_node("Conv", ["Z", "C"], ["O"])],
                       [("X", F32, [1]), ("Y", F32, [1, "batch"])], [("O", F32, [4])],
                       {"C": np.ones((2, 1, 1, 1), np.float32)})
    assert run_pass(model, "fold_conv_affine") == model
