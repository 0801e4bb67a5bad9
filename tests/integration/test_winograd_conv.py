"""NchwcWinogradConv end to end against onnxruntime: a ResNet-like block of 3x3 convolutions
(bias + Relu, bias + residual sum + Relu, one-sided pads without bias, output sizes that are no
multiple of the tile) compiled with each Winograd tile forced and with the default policy, run on
ModelRunner, on the default SIMD path and in a process on the portable path with a 3-thread pool
(other chunks of tiles); float16 too (Converter precision fp16: float16 activations through the
Winograd kernel, float32 transformed weights), against onnxruntime's float32 result with the
float16 direct convolution's own error as the yardstick."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from e2e_helpers import run_in_new_process, run_onnxruntime

from compiler import Compiler
from compiler.converter import Converter
from compiler.kernel_fusion import run_kernel_fusions
from compiler.options import CompilerOptions
from tf_popef_op.runtime import ModelRunner, RuntimeConfig

F = TensorProto.FLOAT
# (N, C, M, H, W): M != C takes a 1x1 projection for the residual
CASES = {
    "resnet_14": (2, 16, 16, 14, 14),
    "odd_planes": (1, 8, 24, 9, 13),
    "stage_56": (1, 64, 64, 56, 56),
    "wide_8": (1, 256, 256, 8, 8),  # 16 tiles of 2x2 (7x7 for conv3), 256 outputs: split over the threads
}
# Every case with each tile forced; the default policy on the cases it takes Winograd for (it keeps
# the direct convolution on the small ones: tests/compiler/kernel_fusion/test_pass_to_winograd_conv.py).
RUNS = [(name, policy) for name in CASES for policy in ("f2x2", "f4x4")] + [("stage_56", "auto"), ("wide_8", "auto")]
# Max error relative to the largest output, float16 against onnxruntime's float32: at most this
# multiple of the float16 direct convolution's (both round every step's output to float16; F(4x4)'s
# transforms add float32 rounding of about 1e-5) plus this.
FP16_ERROR_RATIO, FP16_ERROR_SLACK = 1.5, 2e-4


def resnet_block(n, c, m, h, w, seed=0):
    rng = np.random.default_rng(seed)
    inits = []

    def weights(name, shape):
        fan_in = int(np.prod(shape[1:]))
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32), name))
        return name

    def bias(name, size):
        inits.append(numpy_helper.from_array((rng.standard_normal(size) * 0.1).astype(np.float32), name))
        return name

    p1 = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    nodes = [helper.make_node("Conv", ["X", weights("W1", (m, c, 3, 3)), bias("B1", m)], ["c1"], name="conv1", **p1),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", weights("W2", (m, m, 3, 3)), bias("B2", m)], ["c2"], name="conv2", **p1)]
    shortcut = "X"
    if m != c:
        nodes.append(helper.make_node("Conv", ["X", weights("Wp", (m, c, 1, 1))], ["proj"], name="proj",
                                      kernel_shape=[1, 1]))
        shortcut = "proj"
    nodes += [helper.make_node("Add", ["c2", shortcut], ["s"]), helper.make_node("Relu", ["s"], ["r2"]),
              helper.make_node("Conv", ["r2", weights("W3", (m, m, 3, 3))], ["Y"], name="conv3", kernel_shape=[3, 3],
                               pads=[0, 1, 1, 0])]
    graph = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("X", F, [n, c, h, w])],
                              [helper.make_tensor_value_info("Y", F, [n, m, h, w])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def check_case(name, policy):
    model = resnet_block(*CASES[name])
    fused = run_kernel_fusions(model, name, winograd=policy)
    assert sum(node.op_type == "NchwcWinogradConv" for node in fused.graph.node) == 3, (name, policy)
    feeds = {"X": np.random.default_rng(1).standard_normal(CASES[name][:2] + CASES[name][3:]).astype(np.float32)}
    want = run_onnxruntime(model, feeds)["Y"]
    executable = Compiler.compile(model, options=CompilerOptions(winograd=policy))
    got = ModelRunner(executable, RuntimeConfig()).execute(feeds)["Y"]
    scale = float(np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale, err_msg=f"{name} {policy}")
    return float(np.abs(got - want).max() / scale)


def check_case_fp16(name, policy):
    model = resnet_block(*CASES[name])
    x = np.random.default_rng(1).standard_normal(CASES[name][:2] + CASES[name][3:]).astype(np.float32)
    want = run_onnxruntime(model, {"X": x})["Y"]
    half = Converter(precision="fp16").convert(model)
    fused = run_kernel_fusions(half, name, winograd=policy)
    winograd = [node for node in fused.graph.node if node.op_type == "NchwcWinogradConv"]
    assert len(winograd) == 3, (name, policy)
    u_types = {t.data_type for t in fused.graph.initializer if t.name in {node.input[1] for node in winograd}}
    assert u_types == {TensorProto.FLOAT}, (name, policy, u_types)
    scale = float(np.abs(want).max())
    errors = {}
    for run_policy in (policy, "off"):
        runner = ModelRunner(Compiler.compile(half, options=CompilerOptions(winograd=run_policy)),
                             RuntimeConfig(profile=True))
        got = runner.execute({"X": x.astype(np.float16)})["Y"]
        assert got.dtype == np.float16
        ops = {row["op"] for row in runner.profile()}
        assert ("NchwcWinogradConv" in ops) == (run_policy != "off"), (name, run_policy, sorted(ops))
        errors[run_policy] = float(np.abs(got.astype(np.float32) - want).max() / scale)
    assert errors[policy] <= FP16_ERROR_RATIO * errors["off"] + FP16_ERROR_SLACK, (name, policy, errors)
    return errors


@pytest.mark.parametrize("name,policy", RUNS)
def test_winograd_block_vs_onnxruntime(name, policy):
    check_case(name, policy)


@pytest.mark.parametrize("name,policy", [("resnet_14", "f2x2"), ("odd_planes", "f4x4"), ("stage_56", "auto"),
                                         ("wide_8", "auto")])
def test_winograd_block_fp16_vs_onnxruntime(name, policy):
    check_case_fp16(name, policy)


def test_winograd_block_portable_path_three_threads():
    script = ("import test_winograd_conv as t\n"
              "for name in ('resnet_14', 'odd_planes'):\n"
              "    for policy in ('f2x2', 'f4x4'):\n"
              "        t.check_case(name, policy)\n"
              "        t.check_case_fp16(name, policy)\n"
              "print('checked 8')\n")
    assert "checked 8" in run_in_new_process(script, TF_POPEF_SIMD="portable", TF_POPEF_NUM_THREADS="3")
