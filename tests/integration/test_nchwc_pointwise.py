"""1x1 convolutions in the blocked layout (NchwcConv, kernels/nchwc/nchwc_conv.cc) against
onnxruntime, on the work splits the kernel picks from the shapes: a strided 1x1 on narrow output
rows (ResNet50's 1x1/2 at 14x14 and 28x28: run as a stride-1 one on a copy of the pixels it
reads), a strided 1x1 on rows too wide for that copy, per-axis strides, and pointwise layers with too few
work items for the pool's threads (one block group at batch 1: the plane is cut into row
segments), with one and two passes over the input channels, and outputs big enough to be
written with streaming stores (float32 with a residual sum). Each case is a chain of four 1x1
convolutions (bias, Relu, a residual Add) so the compiler keeps it blocked. float32 within 1e-4
of onnxruntime; float16 (Converter precision fp16) within the float16 tolerance, on the default
SIMD path and in a process forced to the portable one."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from e2e_helpers import assert_matches_fp32_reference, check_every_case_in_new_process, run_onnxruntime, run_with_profile

F = TensorProto.FLOAT

# name: (x shape [N, C, H, W], channels of the strided conv, its strides [sh, sw])
CASES = {
    "stride2_rows_of_7": ((1, 32, 14, 14), 48, [2, 2]),
    "stride2_rows_of_7_batch2": ((2, 24, 13, 13), 32, [2, 2]),
    "stride2_rows_of_14": ((1, 16, 28, 28), 32, [2, 2]),
    "stride2_rows_of_28": ((1, 16, 56, 56), 16, [2, 2]),
    "strides_2_3": ((1, 16, 9, 20), 16, [2, 3]),
    "few_items_two_passes": ((1, 528, 14, 14), 16, [1, 1]),
    "few_items_odd_blocks": ((1, 40, 7, 9), 24, [1, 1]),
    # float32 outputs of 4 MB and more with a residual sum (19 MB) are written with streaming stores
    "large_outputs_streamed": ((8, 32, 48, 48), 256, [1, 1]),
}


def pointwise_chain(x_shape, m, strides, seed=0):
    """Conv 1x1 + Relu -> Conv 1x1 (strides) + bias + Relu -> Conv 1x1 + bias -> Add (the strided
    conv's output) -> Conv 1x1; the strided conv reads a blocked input."""
    rng = np.random.default_rng(seed)
    n, c, h, w = x_shape
    oh, ow = (h - 1) // strides[0] + 1, (w - 1) // strides[1] + 1
    scale = 1.0 / np.sqrt(c)
    inits = [
        numpy_helper.from_array((rng.standard_normal((c, c, 1, 1)) * scale).astype(np.float32), "W0"),
        numpy_helper.from_array((rng.standard_normal((m, c, 1, 1)) * scale).astype(np.float32), "W1"),
        numpy_helper.from_array((rng.standard_normal(m) * 0.1).astype(np.float32), "B1"),
        numpy_helper.from_array((rng.standard_normal((m, m, 1, 1)) * 0.3).astype(np.float32), "W2"),
        numpy_helper.from_array((rng.standard_normal(m) * 0.1).astype(np.float32), "B2"),
        numpy_helper.from_array((rng.standard_normal((m, m, 1, 1)) * 0.3).astype(np.float32), "W3"),
    ]
    nodes = [
        helper.make_node("Conv", ["X", "W0"], ["c0"]),
        helper.make_node("Relu", ["c0"], ["r0"]),
        helper.make_node("Conv", ["r0", "W1", "B1"], ["c1"], strides=strides),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "W2", "B2"], ["c2"]),
        helper.make_node("Add", ["c2", "r1"], ["s2"]),
        helper.make_node("Conv", ["s2", "W3"], ["Y"]),
    ]
    graph = helper.make_graph(nodes, "pointwise_chain", [helper.make_tensor_value_info("X", F, list(x_shape))],
                              [helper.make_tensor_value_info("Y", F, [n, m, oh, ow])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def check_case(name, precision):
    x_shape, m, strides = CASES[name]
    model = pointwise_chain(x_shape, m, strides)
    x = np.random.default_rng(1).standard_normal(x_shape).astype(np.float32)
    want = run_onnxruntime(model, {"X": x})["Y"]
    got, ops = run_with_profile(model, x, precision)
    # Every convolution ran blocked: no NCHW convolution kernel.
    assert "NchwcConv" in ops and not set(ops) & {"Conv", "FusedConv"}, f"{name}: {sorted(ops)}"
    assert_matches_fp32_reference(got, want, precision, name)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", list(CASES))
def test_blocked_pointwise_vs_onnxruntime(name, precision):
    check_case(name, precision)


def test_blocked_pointwise_vs_onnxruntime_on_the_portable_path():
    """Every case again in a process on the portable SIMD path (its own build of the tiles)."""
    check_every_case_in_new_process("test_nchwc_pointwise", len(CASES), TF_POPEF_SIMD="portable")
