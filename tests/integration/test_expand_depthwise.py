"""NchwcInvertedResidual without the project stage (the fused expand 1x1 -> depthwise pair) end to
end against onnxruntime: small EfficientNet-style stacks of MBConv blocks (expand 1x1 + swish,
depthwise 3x3 or 5x5 + swish at stride 1 or 2 with symmetric or TF-style bottom/right pads,
squeeze-and-excite: mean over the plane, reduce 1x1 + swish, excite 1x1 + sigmoid, D·S; project
1x1, the residual Add where the shapes allow), batch 1 (each image cut into row runs per thread,
several bands each), 2 and 3 (whole images), planes of 56, odd sizes and 7. Compiled with every
pair fused (CompilerOptions inverted_residual="all"): float32 within 1e-4 of onnxruntime, float16
(Converter precision fp16) within the float16 tolerance, on the default SIMD path and in a
process on the portable path with a 3-thread pool (other row runs)."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from e2e_helpers import assert_matches_fp32_reference, check_every_case_in_new_process, run_onnxruntime, run_with_profile

from compiler.options import CompilerOptions

F = TensorProto.FLOAT
# name: (x shape [N, C, H, W], blocks of (expansion t, output channels, kernel, stride, depthwise pads))
CASES = {
    "plane_56_batch_1": ((1, 16, 56, 56), [(6, 24, 3, 2, [0, 0, 1, 1]), (6, 24, 3, 1, [1, 1, 1, 1])]),
    "odd_planes_batch_2": ((2, 16, 15, 13), [(6, 16, 5, 1, [2, 2, 2, 2]), (4, 24, 5, 2, [2, 2, 2, 2]),
                                              (6, 24, 3, 1, [1, 1, 1, 1])]),
    "plane_7_batch_3": ((3, 40, 7, 7), [(6, 40, 5, 1, [2, 2, 2, 2]), (6, 48, 3, 1, [1, 1, 1, 1])]),
}


def mbconv_blocks(x_shape, blocks, seed=0):
    rng = np.random.default_rng(seed)
    inits, nodes = [], []

    def tensor(name, shape, scale):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def swish(x):
        nodes.extend([helper.make_node("Sigmoid", [x], [f"{x}_s"]), helper.make_node("Mul", [x, f"{x}_s"], [f"{x}_sw"])])
        return f"{x}_sw"

    x, (n, c, h, w) = "X", x_shape
    for i, (t, m, k, stride, pads) in enumerate(blocks):
        e, r = c * t, max(1, c // 4)
        nodes.append(helper.make_node("Conv", [x, tensor(f"We{i}", (e, c, 1, 1), 1 / np.sqrt(c)),
                                               tensor(f"Be{i}", e, 0.1)], [f"e{i}"]))
        nodes.append(helper.make_node("Conv", [swish(f"e{i}"), tensor(f"Wd{i}", (e, 1, k, k), 0.3),
                                               tensor(f"Bd{i}", e, 0.1)],
                                      [f"d{i}"], kernel_shape=[k, k], group=e, strides=[stride, stride], pads=pads))
        d = swish(f"d{i}")
        nodes.append(helper.make_node("ReduceMean", [d], [f"m{i}"], axes=[2, 3], keepdims=1))
        nodes.append(helper.make_node("Conv", [f"m{i}", tensor(f"Wr{i}", (r, e, 1, 1), 1 / np.sqrt(e)),
                                               tensor(f"Br{i}", r, 0.1)], [f"r{i}"]))
        nodes.append(helper.make_node("Conv", [swish(f"r{i}"), tensor(f"Wx{i}", (e, r, 1, 1), 1 / np.sqrt(r)),
                                               tensor(f"Bx{i}", e, 0.1)], [f"x{i}"]))
        nodes.append(helper.make_node("Sigmoid", [f"x{i}"], [f"g{i}"]))
        nodes.append(helper.make_node("Mul", [d, f"g{i}"], [f"sc{i}"]))
        nodes.append(helper.make_node("Conv", [f"sc{i}", tensor(f"Wp{i}", (m, e, 1, 1), 1 / np.sqrt(e)),
                                               tensor(f"Bp{i}", m, 0.1)], [f"p{i}"]))
        h, w = (h + pads[0] + pads[2] - k) // stride + 1, (w + pads[1] + pads[3] - k) // stride + 1
        if stride == 1 and m == c:
            nodes.append(helper.make_node("Add", [f"p{i}", x], [f"s{i}"]))
            x = f"s{i}"
        else:
            x = f"p{i}"
        c = m
    nodes.append(helper.make_node("Identity", [x], ["Y"]))
    graph = helper.make_graph(nodes, "mbconv", [helper.make_tensor_value_info("X", F, list(x_shape))],
                              [helper.make_tensor_value_info("Y", F, [n, c, h, w])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def check_case(name, precision):
    x_shape, blocks = CASES[name]
    model = mbconv_blocks(x_shape, blocks)
    x = np.random.default_rng(1).standard_normal(x_shape).astype(np.float32)
    want = run_onnxruntime(model, {"X": x})["Y"]
    got, ops = run_with_profile(model, x, precision, CompilerOptions(inverted_residual="all"))
    # per block: the fused pair, then the SE's reduce and excite and the project NchwcConvs
    assert ops.count("NchwcInvertedResidual") == len(blocks), f"{name}: {ops}"
    assert ops.count("NchwcConv") == 3 * len(blocks), f"{name}: {ops}"
    assert_matches_fp32_reference(got, want, precision, name, atol=1e-4 * float(np.abs(want).max()))


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", list(CASES))
def test_fused_pairs_vs_onnxruntime(name, precision):
    check_case(name, precision)


def test_fused_pairs_portable_path_three_threads():
    check_every_case_in_new_process("test_expand_depthwise", len(CASES), TF_POPEF_SIMD="portable",
                                    TF_POPEF_NUM_THREADS="3")
