"""Lowering rules of the NCHW8c internal ops (ToNchwc, FromNchwc, NchwcConv, NchwcMaxPool,
NchwcAveragePool): the
step attrs they write (docs/popef.md, "Internal ops"), and the errors naming the node for
shapes that fit no layout. Plus the `blocked_layout` option that turns the pass off."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler.errors import ConfigError, LoweringError
from compiler.lowering.lower_graph import lower_graph
from compiler.lowering.weights import WeightStore
from compiler.onnx_graph.internal_ops import DOMAIN, VERSION
from compiler.options import CompilerOptions
from compiler_test_helpers import F16, F32, fuse_and_lower, make_model

FLT_MAX = float(np.finfo(np.float32).max)
WINDOW = dict(kernel_shape=[3, 3], strides=[1, 1], dilations=[1, 1], pads=[1, 1, 1, 1])


def internal(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, name=outputs[0], domain=DOMAIN, **attrs)


def steps(nodes, inputs, outputs, inits=None, opset=13):
    model = make_model(nodes, inputs, [(o, F32, None) for o in outputs], inits, opset=opset)
    model.opset_import.append(helper.make_opsetid(DOMAIN, VERSION))
    return lower_graph(model, WeightStore(), "test.onnx").steps


def w(*shape):
    return np.zeros(shape, np.float32)


def test_a_blocked_chain_lowers_to_its_kernels_with_explicit_attrs():
    nodes = [internal("ToNchwc", ["X"], ["Xb"]),
             internal("NchwcConv", ["Xb", "W", "B", "S"], ["Yb"], group=1, activation="Clip",
                      activation_params=[-np.inf, 6.0], **WINDOW),
             internal("NchwcMaxPool", ["Yb"], ["Pb"], kernel_shape=[2, 2], strides=[2, 2], dilations=[1, 1],
                      pads=[0, 0, 0, 0], ceil_mode=1),
             internal("FromNchwc", ["Pb"], ["P"])]
    got = steps(nodes, [("X", F32, [1, 8, 5, 5]), ("S", F32, [1, 2, 5, 5, 8])], ["P"],
                {"W": w(2, 1, 3, 3, 8, 8), "B": w(16)})
    assert [(s.op, s.inputs, s.outputs) for s in got] == [
        ("ToNchwc", ["X"], ["Xb"]), ("NchwcConv", ["Xb", "W", "B", "S"], ["Yb"]),
        ("NchwcMaxPool", ["Yb"], ["Pb"]), ("FromNchwc", ["Pb"], ["P"])]
    assert got[1].attrs == {"kernel_shape": [3, 3], "strides": [1, 1], "dilations": [1, 1], "pads": [1, 1, 1, 1],
                            "group": 1, "activation": "Clip", "activation_params": [-FLT_MAX, 6.0], "has_bias": 1,
                            "has_sum": 1}
    # ceil_mode is only in the output's shape (3x3 where the floor formula gives 2x2)
    assert got[2].attrs == {"kernel_shape": [2, 2], "strides": [2, 2], "dilations": [1, 1], "pads": [0, 0, 0, 0]}
    assert got[0].attrs == {} and got[3].attrs == {}


@pytest.mark.parametrize("x_shape, w_shape, group", [
    ([1, 3, 9, 9], (2, 3, 3, 3, 8), 1),      # plain input: W [M/G, C, KH, KW, G], G = 8
    ([1, 3, 9, 9], (1, 3, 3, 3, 16), 1),     # G = 16: output channels in pairs of blocks
    ([1, 2, 9, 9, 8], (2, 3, 3, 8), 16),     # depthwise: W [C/8, KH, KW, 8]
], ids=["plain-input", "plain-input-paired", "depthwise"])
def test_nchwc_conv_variants_pass_only_present_inputs(x_shape, w_shape, group):
    node = internal("NchwcConv", ["X", "W", "", "S"], ["Y"], group=group, kernel_shape=[3, 3], strides=[2, 2],
                    dilations=[1, 1], pads=[0, 0, 0, 0])
    (step,) = steps([node], [("X", F32, x_shape), ("S", F32, [1, 2, 4, 4, 8])], ["Y"], {"W": w(*w_shape)})
    assert step.inputs == ["X", "W", "S"]
    assert step.attrs == {"kernel_shape": [3, 3], "strides": [2, 2], "dilations": [1, 1], "pads": [0, 0, 0, 0],
                          "group": group, "activation": "", "activation_params": [], "has_bias": 0, "has_sum": 1}


def test_lower_graph_writes_the_blocked_layout_unless_turned_off():
    conv = helper.make_node("Conv", ["X", "W"], ["Y"], pads=[1, 1, 1, 1], name="conv")
    model = make_model([conv], [("X", F32, [1, 8, 4, 4])], [("Y", F32, None)],
                       {"W": np.ones((16, 8, 3, 3), np.float32)})
    blocked = fuse_and_lower(model, WeightStore(), "test.onnx")
    assert [s.op for s in blocked.steps] == ["ToNchwc", "NchwcConv", "FromNchwc"]
    plain = fuse_and_lower(model, WeightStore(), "test.onnx", blocked_layout=False)
    assert [s.op for s in plain.steps] == ["Conv"]


def test_blocked_layout_option_is_a_bool():
    assert CompilerOptions().blocked_layout is True
    assert CompilerOptions(blocked_layout=False).validate().to_dict()["blocked_layout"] is False
    with pytest.raises(ConfigError, match="CompilerOptions.blocked_layout must be True or False, got 'yes'"):
        CompilerOptions(blocked_layout="yes").validate()


# --- errors -------------------------------------------------------------------------------------
def _conv_error(x_shape, w_shape, match, group=1, inits=None, extra=(), **attrs):
    attrs = {**WINDOW, **attrs}
    node = internal("NchwcConv", ["X", "W", *extra], ["Y"], group=group, **attrs)
    with pytest.raises(LoweringError, match=match):
        steps([node], [("X", F32, x_shape)], ["Y"], {"W": w(*w_shape), **(inits or {})})


def test_nchwc_conv_weights_of_the_wrong_rank_for_the_variant():
    _conv_error([1, 1, 5, 5, 8], (8, 8, 3, 3), r"node 'Y' \(NchwcConv\): W \[8, 8, 3, 3\] must be "
                r"\[M/G, C/8, KH, KW, 8, G\] \(rank 6\) for the blocked variant")
    _conv_error([1, 3, 5, 5], (1, 3, 3, 3, 8, 8), r"W \[1, 3, 3, 3, 8, 8\] must be \[M/G, C, KH, KW, G\] "
                r"\(rank 5\) for the plain_input variant")


def test_nchwc_conv_weights_of_the_wrong_shape():
    _conv_error([1, 2, 5, 5, 8], (1, 1, 3, 3, 8, 8), r"W \[1, 1, 3, 3, 8, 8\] must be \[M/G, C/8, KH, KW, 8, G\] "
                r"= \[1, 2, 3, 3, 8, 8\] for the blocked variant with X \[1, 2, 5, 5, 8\]")
    _conv_error([1, 2, 5, 5, 8], (1, 1, 3, 3, 8, 16), r"W \[1, 1, 3, 3, 8, 16\] must be \[M/G, C/8, KH, KW, 8, G\] "
                r"= \[1, 2, 3, 3, 8, 16\] for the blocked variant")
    _conv_error([1, 2, 5, 5, 8], (1, 2, 3, 3, 8, 4), r"W \[1, 2, 3, 3, 8, 4\] must be \[M/G, C/8, KH, KW, 8, G\] "
                r"with G = 8 or 16 output channels per group, not 4")


def test_nchwc_conv_input_that_is_not_blocked_in_eights():
    _conv_error([1, 2, 5, 5, 4], (1, 2, 3, 3, 8, 8), r"blocked X \[1, 2, 5, 5, 4\] must end in a block of 8")


def test_nchwc_conv_group_that_fits_no_variant():
    _conv_error([1, 2, 5, 5, 8], (2, 3, 3, 8), r"group 4 with a blocked X of 16 channels", group=4)
    _conv_error([1, 16, 5, 5], (2, 16, 3, 3, 8), r"X \[1, 16, 5, 5\] with group 16 fits no NchwcConv variant",
                group=16)


def test_nchwc_conv_kernel_shape_and_bias_must_match():
    _conv_error([1, 1, 5, 5, 8], (1, 1, 3, 3, 8, 8), r"kernel_shape \[2, 2\] differs from the weights' window",
                kernel_shape=[2, 2])
    _conv_error([1, 1, 5, 5, 8], (1, 1, 3, 3, 8, 8), r"bias 'B' has shape \[4\], expected \[8\]",
                inits={"B": w(4)}, extra=("B",))


def test_nchwc_conv_unknown_activation():
    _conv_error([1, 1, 5, 5, 8], (1, 1, 3, 3, 8, 8), r"unknown activation 'Mish'", activation="Mish")


def test_nchwc_conv_is_float32_or_float16():
    def lower(onnx_type, np_type):
        node = internal("NchwcConv", ["X", "W"], ["Y"], group=1, **WINDOW)
        model = make_model([node], [("X", onnx_type, [1, 1, 5, 5, 8])], [("Y", onnx_type, [1, 1, 5, 5, 8])],
                           {"W": np.zeros((1, 1, 3, 3, 8, 8), np_type)})
        model.opset_import.append(helper.make_opsetid(DOMAIN, VERSION))
        return lower_graph(model, WeightStore(), "test.onnx")

    lower(F16, np.float16)
    with pytest.raises(LoweringError, match=r"input 'X' has dtype float64; the emulator's NchwcConv supports "
                                            r"float32, float16"):
        lower(TensorProto.DOUBLE, np.float64)


def test_to_nchwc_needs_channels_in_whole_blocks():
    with pytest.raises(LoweringError, match=r"node 'Y' \(ToNchwc\): input 'X' has shape \[1, 12, 2, 2\]; ToNchwc "
                                            r"takes \[N, C, H, W\] with C a multiple of 8"):
        steps([internal("ToNchwc", ["X"], ["Y"])], [("X", F32, [1, 12, 2, 2])], ["Y"])


def test_from_nchwc_and_the_pools_need_a_blocked_input():
    for node in (internal("FromNchwc", ["X"], ["Y"]), internal("NchwcMaxPool", ["X"], ["Y"], kernel_shape=[2, 2]),
                 internal("NchwcAveragePool", ["X"], ["Y"], kernel_shape=[2, 2])):
        with pytest.raises(LoweringError, match=rf"node 'Y' \({node.op_type}\): input 'X' has shape \[1, 16, 2, 2\]; "
                                                r"a blocked tensor is \[N, C/8, H, W, 8\]"):
            steps([node], [("X", F32, [1, 16, 2, 2])], ["Y"])


def test_max_pool_needs_a_kernel_shape_that_fits():
    with pytest.raises(LoweringError, match=r"missing required attribute 'kernel_shape'"):
        steps([internal("NchwcMaxPool", ["X"], ["Y"])], [("X", F32, [1, 1, 4, 4, 8])], ["Y"])
    with pytest.raises(LoweringError, match=r"kernel_shape \[2\] does not have one entry per spatial dim"):
        steps([internal("NchwcMaxPool", ["X"], ["Y"], kernel_shape=[2])], [("X", F32, [1, 1, 4, 4, 8])], ["Y"])


def test_max_pool_zero_pads_is_written_only_when_set_and_needs_the_floor_shape():
    def pool(**attrs):
        node = internal("NchwcMaxPool", ["X"], ["Y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], **attrs)
        return steps([node], [("X", F32, [1, 2, 8, 8, 8])], ["Y"])[0].attrs

    window = {"kernel_shape": [3, 3], "strides": [2, 2], "dilations": [1, 1], "pads": [1, 1, 1, 1]}
    assert pool() == window and pool(zero_pads=0) == window
    assert pool(zero_pads=1) == {**window, "zero_pads": 1}
    with pytest.raises(LoweringError, match=r"node 'Y' \(NchwcMaxPool\): attribute 'zero_pads' is 2, expected 0 or 1"):
        pool(zero_pads=2)
    with pytest.raises(LoweringError, match=r"zero_pads = 1 with ceil_mode = 1 is not supported"):
        pool(zero_pads=1, ceil_mode=1)


def test_average_pool_writes_its_window_and_count_include_pad():
    def pool(**attrs):
        node = internal("NchwcAveragePool", ["X"], ["Y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                        **attrs)
        return steps([node], [("X", F32, [1, 2, 8, 8, 8])], ["Y"])[0]

    window = {"kernel_shape": [3, 3], "strides": [2, 2], "dilations": [1, 1], "pads": [1, 1, 1, 1]}
    assert pool().op == "NchwcAveragePool" and pool().attrs == {**window, "count_include_pad": 0}
    assert pool(count_include_pad=1, ceil_mode=1).attrs == {**window, "count_include_pad": 1}
    with pytest.raises(LoweringError, match=r"node 'Y' \(NchwcAveragePool\): attribute 'count_include_pad' is 2, "
                                            r"expected 0 or 1"):
        pool(count_include_pad=2)
    with pytest.raises(LoweringError, match=r"node 'Y' \(NchwcAveragePool\): missing required attribute 'kernel_shape'"):
        steps([internal("NchwcAveragePool", ["X"], ["Y"])], [("X", F32, [1, 1, 4, 4, 8])], ["Y"])
