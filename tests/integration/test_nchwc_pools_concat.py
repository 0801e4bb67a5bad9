"""Pooling and Concat in the blocked layout against onnxruntime: InceptionV3's pool branch
(AveragePool 3x3 stride 1 pads 1, count_include_pad 0 and 1, then a 1x1 conv), its reduction's
MaxPool 3x3/2, and DenseNet's dense-block Concat of a blocked conv output onto the running
feature map, at batch 1 (one outer slab of the concat) and 2, with planes wider than one piece
of the pools' two-pass rows. Compiled with the default options, the pools are NchwcAveragePool
/ NchwcMaxPool and the Concat runs on blocked tensors, nothing converted inside the block.
float32 within 1e-4 of onnxruntime; float16 within the float16 tolerance; also in a process on
the portable SIMD path."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from e2e_helpers import assert_matches_fp32_reference, check_every_case_in_new_process, run_onnxruntime, run_with_profile

F = TensorProto.FLOAT

# name: (x shape [N, C, H, W], count_include_pad)
CASES = {
    "inception_35": ((1, 16, 35, 35), 0),
    "wide_rows_b2": ((2, 8, 9, 150), 0),
    "count_include_pad": ((1, 8, 17, 17), 1),
}


def pools_concat_block(x_shape, count_include_pad, seed=0):
    rng = np.random.default_rng(seed)
    n, c, h, w = x_shape
    inits = {}
    nodes = []

    def conv(x, m, cin, out, k=1):
        inits[f"{out}_W"] = (rng.standard_normal((m, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float32)
        inits[f"{out}_B"] = (rng.standard_normal(m) * 0.1).astype(np.float32)
        nodes.append(helper.make_node("Conv", [x, f"{out}_W", f"{out}_B"], [out], kernel_shape=[k, k],
                                      pads=[k // 2] * 4))
        nodes.append(helper.make_node("Relu", [out], [out + "_relu"]))
        return out + "_relu"

    stem = conv("X", 2 * c, c, "stem")
    nodes.append(helper.make_node("AveragePool", [stem], ["avg"], kernel_shape=[3, 3], strides=[1, 1],
                                  pads=[1, 1, 1, 1], count_include_pad=count_include_pad))
    branch = conv("avg", c, 2 * c, "pool_proj")
    grown = conv(stem, 8, 2 * c, "grow", k=3)  # a dense layer's new 8 channels
    nodes.append(helper.make_node("Concat", [stem, branch, grown], ["cat"], axis=1))
    nodes.append(helper.make_node("MaxPool", ["cat"], ["Y"], kernel_shape=[3, 3], strides=[2, 2]))
    channels = 2 * c + c + 8
    graph = helper.make_graph(nodes, "pools_concat", [helper.make_tensor_value_info("X", F, list(x_shape))],
                              [helper.make_tensor_value_info("Y", F, [n, channels, (h - 3) // 2 + 1,
                                                                      (w - 3) // 2 + 1])],
                              [numpy_helper.from_array(v, name) for name, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def check_case(name, precision):
    model = pools_concat_block(*CASES[name])
    x = np.random.default_rng(1).standard_normal(CASES[name][0]).astype(np.float32)
    want = run_onnxruntime(model, {"X": x})["Y"]
    got, ops = run_with_profile(model, x, precision)
    assert ops.count("NchwcAveragePool") == ops.count("NchwcMaxPool") == ops.count("Concat") == 1, f"{name}: {ops}"
    assert ops.count("ToNchwc") == ops.count("FromNchwc") == 1, f"{name}: {ops}"
    assert_matches_fp32_reference(got, want, precision, name)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", list(CASES))
def test_pools_and_concat_block_vs_onnxruntime(name, precision):
    check_case(name, precision)


def test_pools_and_concat_blocks_vs_onnxruntime_on_the_portable_path():
    check_every_case_in_new_process("test_nchwc_pools_concat", len(CASES), TF_POPEF_SIMD="portable")
