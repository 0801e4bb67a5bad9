"""The depthwise convolution kernels (tf_popef_op/runtime/cc/kernels/conv/depthwise_conv.h) against
onnxruntime: the direct AVX2 kernel's shapes (3x3 and 5x5, stride 1 and 2, symmetric and
asymmetric pads as left by a folded Keras ZeroPadding2D, MobileNetV2's plane sizes, odd and
even planes down to 1x1, batch > 1) and the generic kernel's (dilations, other windows and
strides, 1-D and 3-D), plain Conv and FusedConv (bias + Clip(0, 6) like MobileNetV2, and
bias + residual sum + Relu), on the default SIMD path here and in processes forced to the
portable path and to a 3-thread pool (which changes how the planes are split)."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from e2e_helpers import conv_attributes_and_output, run_in_new_process, run_onnxruntime

from compiler import Compiler
from compiler.options import CompilerOptions
from tf_popef_op.runtime import ModelRunner, RuntimeConfig

F = TensorProto.FLOAT

# name: (x shape, window, conv attrs); the weights are [C, 1, window...] with group = C.
CASES = {
    "mb2_112_s1": ((1, 32, 112, 112), (3, 3), dict(pads=[1, 1, 1, 1])),
    "mb2_112_s2": ((1, 8, 112, 112), (3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    "zero_padding_folded_s2": ((2, 16, 56, 56), (3, 3), dict(strides=[2, 2], pads=[0, 0, 1, 1])),
    "mb2_28_batch3": ((3, 24, 28, 28), (3, 3), dict(pads=[1, 1, 1, 1])),
    "mb2_14_s2_odd": ((2, 20, 15, 15), (3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    "mb2_7x7_many_channels": ((2, 96, 7, 7), (3, 3), dict(pads=[1, 1, 1, 1])),
    "plane_1x1": ((2, 5, 1, 1), (3, 3), dict(pads=[1, 1, 1, 1])),
    "plane_2x2_s2": ((2, 5, 2, 2), (3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1])),
    "even_odd_rect_asym": ((1, 6, 10, 33), (3, 3), dict(pads=[1, 0, 0, 1])),
    "rect_s2_pad_begin_only": ((1, 6, 17, 40), (3, 3), dict(strides=[2, 2], pads=[1, 1, 0, 0])),
    "valid_no_pads": ((2, 4, 9, 12), (3, 3), {}),
    "k5_s1": ((1, 12, 19, 19), (5, 5), dict(pads=[2, 2, 2, 2])),
    "k5_s2_asym": ((2, 12, 20, 21), (5, 5), dict(strides=[2, 2], pads=[1, 2, 2, 1])),
    "generic_dilated": ((2, 8, 16, 16), (3, 3), dict(dilations=[2, 2], pads=[2, 2, 2, 2])),
    "generic_stride3": ((1, 8, 17, 17), (3, 3), dict(strides=[3, 3], pads=[1, 1, 1, 1])),
    "generic_mixed_strides": ((1, 8, 16, 16), (3, 3), dict(strides=[1, 2], pads=[1, 1, 1, 1])),
    "generic_7x7": ((1, 6, 14, 14), (7, 7), dict(pads=[3, 3, 3, 3])),
    "generic_1d": ((2, 6, 50), (3,), dict(pads=[1, 1])),
    "generic_3d": ((1, 4, 5, 6, 7), (3, 3, 3), dict(pads=[1, 1, 1, 1, 1, 1])),
}

EPILOGUES = ["plain", "bias_relu6", "bias_sum_relu"]


def depthwise_model(x_shape, window, attrs, epilogue, seed=0):
    """Depthwise Conv(X, W[, B]), then Clip(0, 6) or + R (a residual input) and Relu: with
    fusion the compiler makes one FusedConv of them (bias, sum, activation in the kernel)."""
    rng = np.random.default_rng(seed)
    c = x_shape[1]
    w_shape = (c, 1, *window)
    inits = [numpy_helper.from_array((rng.standard_normal(w_shape) * 0.4).astype(np.float32), "W")]
    conv_inputs = ["X", "W"]
    if epilogue != "plain":
        inits.append(numpy_helper.from_array(rng.standard_normal(c).astype(np.float32), "B"))
        conv_inputs.append("B")
    attrs, out = conv_attributes_and_output(x_shape, window, c, attrs)
    conv_out = "Y" if epilogue == "plain" else "C"
    nodes = [helper.make_node("Conv", conv_inputs, [conv_out], kernel_shape=list(window), group=c, **attrs)]
    inputs = [helper.make_tensor_value_info("X", F, list(x_shape))]
    if epilogue == "bias_relu6":
        inits += [numpy_helper.from_array(np.array(0, np.float32), "lo"),
                  numpy_helper.from_array(np.array(6, np.float32), "hi")]
        nodes.append(helper.make_node("Clip", ["C", "lo", "hi"], ["Y"]))
    elif epilogue == "bias_sum_relu":
        nodes += [helper.make_node("Add", ["C", "R"], ["S"]), helper.make_node("Relu", ["S"], ["Y"])]
        inputs.append(helper.make_tensor_value_info("R", F, out))
    graph = helper.make_graph(nodes, "depthwise", inputs, [helper.make_tensor_value_info("Y", F, out)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), out


def check_case(name, epilogue):
    x_shape, window, attrs = CASES[name]
    model, out = depthwise_model(x_shape, window, attrs, epilogue)
    rng = np.random.default_rng(1)
    # Scaled so that Clip(0, 6) clips at both ends.
    feeds = {"X": (rng.standard_normal(x_shape) * 3).astype(np.float32)}
    if epilogue == "bias_sum_relu":
        feeds["R"] = rng.standard_normal(out).astype(np.float32)
    want = run_onnxruntime(model, feeds)["Y"]
    executable = Compiler.compile(model, options=CompilerOptions(kernel_fusion=epilogue != "plain"))
    got = ModelRunner(executable, RuntimeConfig()).execute(feeds)["Y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=f"{name} {epilogue}")


@pytest.mark.parametrize("epilogue", EPILOGUES)
@pytest.mark.parametrize("name", list(CASES))
def test_depthwise_vs_onnxruntime(name, epilogue):
    check_case(name, epilogue)


@pytest.mark.parametrize("env", [{"TF_POPEF_SIMD": "portable"}, {"TF_POPEF_NUM_THREADS": "3"}],
                         ids=["portable_path", "three_threads"])
def test_depthwise_vs_onnxruntime_other_settings(env):
    """Every case again in a process on the portable SIMD path (the generic kernel for every
    shape) or with a 3-thread pool (other plane splits and per-thread strip buffers)."""
    script = ("import test_depthwise_conv as t\n"
              "for name in t.CASES:\n"
              "    for epilogue in t.EPILOGUES:\n"
              "        t.check_case(name, epilogue)\n"
              "print('checked', len(t.CASES) * len(t.EPILOGUES))\n")
    assert f"checked {len(CASES) * len(EPILOGUES)}" in run_in_new_process(script, **env)
