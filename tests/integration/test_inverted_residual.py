"""NchwcInvertedResidual end to end against onnxruntime: small MobileNetV2-like stacks of
inverted-residual blocks (expand 1x1 + Relu6, depthwise 3x3 + Relu6 at stride 1 or 2 with
symmetric or TF-style bottom/right pads, project 1x1, the residual Add where the shapes allow),
batch 1 (each image cut into row runs per thread, several bands each; on the 7x7 plane in two
phases), 2 and 3 (whole images), planes of 56, odd sizes and 7. Compiled with every block fused (CompilerOptions
inverted_residual="all"): float32 within 1e-4 of onnxruntime, float16 (Converter precision
fp16) within the float16 tolerance, on the default SIMD path and in a process on the portable
path with a 3-thread pool (other row runs)."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from e2e_helpers import assert_matches_fp32_reference, check_every_case_in_new_process, run_onnxruntime, run_with_profile

from compiler.options import CompilerOptions

F = TensorProto.FLOAT
# name: (x shape [N, C, H, W], blocks of (expansion t, output channels, stride, depthwise pads))
CASES = {
    "plane_56_batch_1": ((1, 24, 56, 56), [(6, 24, 1, [1, 1, 1, 1]), (6, 32, 2, [1, 1, 1, 1])]),
    "odd_planes_batch_2": ((2, 16, 15, 13), [(6, 16, 1, [1, 1, 1, 1]), (4, 24, 2, [0, 0, 1, 1]),
                                              (6, 24, 1, [1, 1, 1, 1])]),
    "plane_7_batch_3": ((3, 32, 7, 7), [(6, 32, 1, [1, 1, 1, 1]), (6, 48, 1, [1, 1, 1, 1])]),
    # two phases (expanded-channel runs, then the project by output groups or by pixels)
    "plane_7_batch_1": ((1, 32, 7, 7), [(6, 32, 1, [1, 1, 1, 1]), (6, 48, 1, [1, 1, 1, 1])]),
}


def mobilenet_blocks(x_shape, blocks, seed=0):
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(np.array(0, np.float32), "lo"), numpy_helper.from_array(np.array(6, np.float32),
                                                                                              "hi")]
    nodes = []

    def tensor(name, shape, scale):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    x, (n, c, h, w) = "X", x_shape
    for i, (t, m, stride, pads) in enumerate(blocks):
        e = c * t
        nodes += [helper.make_node("Conv", [x, tensor(f"We{i}", (e, c, 1, 1), 1 / np.sqrt(c)), tensor(f"Be{i}", e, 0.1)],
                                   [f"e{i}"]),
                  helper.make_node("Clip", [f"e{i}", "lo", "hi"], [f"er{i}"]),
                  helper.make_node("Conv", [f"er{i}", tensor(f"Wd{i}", (e, 1, 3, 3), 0.3), tensor(f"Bd{i}", e, 0.1)],
                                   [f"d{i}"], kernel_shape=[3, 3], group=e, strides=[stride, stride], pads=pads),
                  helper.make_node("Clip", [f"d{i}", "lo", "hi"], [f"dr{i}"]),
                  helper.make_node("Conv", [f"dr{i}", tensor(f"Wp{i}", (m, e, 1, 1), 1 / np.sqrt(e)),
                                            tensor(f"Bp{i}", m, 0.1)], [f"p{i}"])]
        h, w = (h + pads[0] + pads[2] - 3) // stride + 1, (w + pads[1] + pads[3] - 3) // stride + 1
        if stride == 1 and m == c:
            nodes.append(helper.make_node("Add", [f"p{i}", x], [f"s{i}"]))
            x = f"s{i}"
        else:
            x = f"p{i}"
        c = m
    nodes.append(helper.make_node("Identity", [x], ["Y"]))
    graph = helper.make_graph(nodes, "blocks", [helper.make_tensor_value_info("X", F, list(x_shape))],
                              [helper.make_tensor_value_info("Y", F, [n, c, h, w])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def check_case(name, precision):
    x_shape, blocks = CASES[name]
    model = mobilenet_blocks(x_shape, blocks)
    x = np.random.default_rng(1).standard_normal(x_shape).astype(np.float32)
    want = run_onnxruntime(model, {"X": x})["Y"]
    got, ops = run_with_profile(model, x, precision, CompilerOptions(inverted_residual="all"))
    assert ops.count("NchwcInvertedResidual") == len(blocks) and "NchwcConv" not in ops, f"{name}: {ops}"
    assert_matches_fp32_reference(got, want, precision, name, atol=1e-4 * float(np.abs(want).max()))


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", list(CASES))
def test_fused_blocks_vs_onnxruntime(name, precision):
    check_case(name, precision)


def test_fused_blocks_portable_path_three_threads():
    check_every_case_in_new_process("test_inverted_residual", len(CASES), TF_POPEF_SIMD="portable",
                                    TF_POPEF_NUM_THREADS="3")
