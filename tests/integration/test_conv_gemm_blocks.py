"""The blocked GEMM convolution paths (tf_popef_op/runtime/cc/kernels/conv/conv_gemm.h) against
onnxruntime: pointwise blocks read straight from X, im2col panels built per block of output
columns (blocks that start and end mid output row), images merged into one column space at
batch > 1 on small planes (blocks crossing image boundaries, output scattered back to NCHW),
and row splits for narrow products; with groups, strides, dilations, asymmetric pads, 1-D
and 3-D windows, with and without the fused epilogue (bias + residual sum + activation), and
at 1, 2 (the default on the 2-core hosts) and 3 pool threads, which change the block counts."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from e2e_helpers import conv_attributes_and_output, run_in_new_process, run_onnxruntime

from compiler import Compiler
from compiler.options import CompilerOptions
from tf_popef_op.runtime import ModelRunner, RuntimeConfig

F = TensorProto.FLOAT

# name: (x shape, W shape, conv attrs). Columns = output positions per image; blocks hold
# ~256 of them, so planes above 256 positions split inside the image, smaller ones merge
# the images of the batch.
CASES = {
    "pointwise_batch1_blocks_mid_plane": ((1, 24, 23, 23), (40, 24, 1, 1), {}),
    "pointwise_merged_blocks_cross_images": ((3, 10, 9, 11), (12, 10, 1, 1), {}),
    "pointwise_merged_grouped": ((5, 12, 7, 7), (18, 4, 1, 1), dict(group=3)),
    "pointwise_rows_split_small_plane": ((1, 40, 5, 7), (96, 40, 1, 1), {}),
    "pointwise_batch8_7x7": ((8, 64, 7, 7), (48, 64, 1, 1), {}),
    "im2col_batch1_blocks_mid_row": ((1, 5, 19, 21), (16, 5, 3, 3), dict(pads=[1, 1, 1, 1])),
    "im2col_batch2_two_images_of_blocks": ((2, 6, 24, 24), (8, 6, 3, 3), dict(pads=[1, 1, 1, 1])),
    "im2col_merged_strided_dilated_asym_pads": ((3, 4, 13, 12), (10, 4, 3, 3),
                                                dict(strides=[2, 1], dilations=[2, 1], pads=[2, 0, 1, 3])),
    "im2col_grouped_dilated_big_plane": ((2, 6, 24, 20), (9, 2, 3, 3), dict(group=3, dilations=[2, 2],
                                                                            pads=[2, 2, 2, 2])),
    "im2col_1x1_stride2_merged": ((4, 8, 14, 14), (16, 8, 1, 1), dict(strides=[2, 2])),
    "im2col_rows_split_small_plane": ((1, 16, 4, 4), (80, 16, 3, 3), dict(pads=[1, 1, 1, 1])),
    "im2col_batch8_7x7_like_resnet": ((8, 32, 7, 7), (64, 32, 3, 3), dict(pads=[1, 1, 1, 1])),
    "im2col_5x5_stride3_no_pad": ((2, 3, 40, 37), (7, 3, 5, 5), dict(strides=[3, 3])),
    "conv1d_long": ((1, 4, 700), (6, 4, 5), dict(pads=[2, 2], dilations=[1])),
    "conv1d_merged_strided": ((3, 5, 90), (7, 5, 3), dict(strides=[2], pads=[0, 1])),
    "conv3d_blocks_mid_plane": ((2, 3, 6, 7, 8), (4, 3, 3, 3, 3), dict(pads=[1, 1, 1, 1, 1, 1])),
}


def conv_model(x_shape, w_shape, attrs, epilogue, seed=0):
    """Conv(X, W[, B]) then, with `epilogue`, + R (a residual input) and Relu: the compiler fuses
    those into one FusedConv (bias, sum, activation in the kernel's epilogue)."""
    rng = np.random.default_rng(seed)
    m = w_shape[0]
    inits = [numpy_helper.from_array((rng.standard_normal(w_shape) * 0.3).astype(np.float32), "W")]
    conv_inputs = ["X", "W"]
    if epilogue:
        inits.append(numpy_helper.from_array(rng.standard_normal(m).astype(np.float32), "B"))
        conv_inputs.append("B")
    attrs, out = conv_attributes_and_output(x_shape, w_shape[2:], m, attrs)
    nodes = [helper.make_node("Conv", conv_inputs, ["C" if epilogue else "Y"], kernel_shape=list(w_shape[2:]),
                              **attrs)]
    inputs = [helper.make_tensor_value_info("X", F, list(x_shape))]
    if epilogue:
        nodes += [helper.make_node("Add", ["C", "R"], ["S"]), helper.make_node("Relu", ["S"], ["Y"])]
        inputs.append(helper.make_tensor_value_info("R", F, out))
    graph = helper.make_graph(nodes, "conv", inputs, [helper.make_tensor_value_info("Y", F, out)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), out


def check_case(name, epilogue):
    x_shape, w_shape, attrs = CASES[name]
    model, out = conv_model(x_shape, w_shape, attrs, epilogue)
    rng = np.random.default_rng(1)
    feeds = {"X": rng.standard_normal(x_shape).astype(np.float32)}
    if epilogue:
        feeds["R"] = rng.standard_normal(out).astype(np.float32)
    want = run_onnxruntime(model, feeds)["Y"]
    executable = Compiler.compile(model, options=CompilerOptions(kernel_fusion=epilogue))
    got = ModelRunner(executable, RuntimeConfig()).execute(feeds)["Y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.parametrize("epilogue", [False, True], ids=["plain", "bias_sum_relu"])
@pytest.mark.parametrize("name", list(CASES))
def test_conv_gemm_blocks(name, epilogue):
    check_case(name, epilogue)


@pytest.mark.parametrize("threads", ["1", "3"])
def test_conv_gemm_blocks_other_thread_counts(threads):
    """The pool size changes the block and chunk counts: every case again in a process whose
    pool has `threads` threads."""
    script = ("import test_conv_gemm_blocks as t\n"
              "for name in t.CASES:\n"
              "    for epilogue in (False, True):\n"
              "        t.check_case(name, epilogue)\n"
              "print('checked', len(t.CASES) * 2)\n")
    assert f"checked {len(CASES) * 2}" in run_in_new_process(script, TF_POPEF_NUM_THREADS=threads)
