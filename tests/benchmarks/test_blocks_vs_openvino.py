"""benchmarks/blocks_vs_openvino.py: layers and steps are put into MobileNetV2's blocks by their
Keras names: a node by its own name, a tf2onnx "Conv__<n>" by its weight's name, a Clip after it
by its input's producer (not by the shared Relu6 bound every Clip reads), and an OpenVINO layer
or one of our steps by its name with "/..." suffixes stripped. The timing itself needs OpenVINO
(a benchmark requirement, not a test one)."""
import os
import sys

from onnx import TensorProto, helper, numpy_helper
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "benchmarks"))
import blocks_vs_openvino as bvo  # noqa: E402

M = "StatefulPartitionedCall/mobilenetv2_1.00_224_1/"


def _model():
    def w(name, shape):
        return numpy_helper.from_array(np.zeros(shape, np.float32), name)
    inits = [w(M + "Conv1_1/convolution/merged_input:0", (8, 3, 3, 3)),
             w(M + "block_16_expand_relu_1/Relu6_min__318", ()),
             w(M + "block_3_expand_1/convolution/merged_input:0", (48, 8, 1, 1)),
             w("const_fold_opt__601", (48, 1, 3, 3))]
    nodes = [
        helper.make_node("Conv", ["x", inits[0].name], ["Conv__339:0"], name="Conv__339", strides=[2, 2]),
        helper.make_node("Clip", ["Conv__339:0", inits[1].name], ["r0"], name=M + "Conv1_relu_1/Relu6"),
        helper.make_node("Conv", ["r0", inits[2].name], ["Conv__379:0"], name="Conv__379"),
        # every Clip reads block 16's bound: the Clip goes with its input's producer, not with it
        helper.make_node("Clip", ["Conv__379:0", inits[1].name], ["r1"], name="Clip__1"),
        helper.make_node("Conv", ["r1", inits[3].name], ["d"], name=M + "block_3_depthwise_1/depthwise", group=48),
    ]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("d", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph)


def test_nodes_go_to_their_blocks_by_name_weight_or_producer():
    groups = bvo.groups_of(_model())
    assert groups["Conv__339"] == "stem"
    assert groups["Conv__379"] == "block 03"
    assert groups["Clip__1"] == "block 03"
    assert groups[M + "block_3_depthwise_1/depthwise"] == "block 03"


def test_layer_names_with_suffixes_find_their_block():
    groups = bvo.groups_of(_model())
    assert bvo.group_of_name("Conv__379/WithoutBiases", groups) == "block 03"
    assert bvo.group_of_name(M + "block_12_project_BN_1/FusedBatchNormV3", groups) == "block 12"
    assert bvo.group_of_name(M + "expanded_conv_project_1/convolution", groups) == "block 00"
    assert bvo.group_of_name("Conv__999", groups) is None


def test_flops_count_each_groups_convolutions_at_the_batch():
    flops = bvo.flops_of(_model(), batch=2)
    # stem: 8 outputs x 3x3 output pixels x (3 channels x 3x3 taps), x 2 per multiply-add, x batch 2
    assert flops["stem"] == 2 * 2 * 8 * 9 * 27
    # block 3: the 1x1 expand 8 -> 48 on 3x3 pixels, and the depthwise 3x3 (one input channel each)
    # on the 3x3 plane unpadded (one output pixel)
    assert flops["block 03"] == 2 * 2 * (48 * 9 * 8 + 48 * 1 * 9)


def test_scaled_groups_add_up_to_the_unprofiled_latency():
    by_group = {"stem": 200.0, "block 01": 500.0, "other": 300.0}
    scaled = bvo.scale_to_latency(by_group, profiled_total=1000.0, latency=840.0)
    assert scaled == {"stem": 168.0, "block 01": 420.0, "other": 252.0}
    assert abs(sum(scaled.values()) - 840.0) < 1e-9


E = "StatefulPartitionedCall/efficientnetb0_1/"


def test_efficientnet_layers_go_to_their_blocks_and_the_squeeze_excite_to_its_own_row():
    def w(name, shape):
        return numpy_helper.from_array(np.zeros(shape, np.float32), name)
    inits = [w(E + "stem_conv_1/convolution/merged_input:0", (8, 3, 3, 3)),
             w(E + "block2a_expand_conv_1/convolution/merged_input:0", (16, 8, 1, 1)),
             w(E + "block2a_se_reduce_1/convolution/ReadVariableOp:0", (4, 16, 1, 1))]
    nodes = [helper.make_node("Conv", ["x", inits[0].name], ["Conv__2604:0"], name="Conv__2604"),
             helper.make_node("Sigmoid", ["Conv__2604:0"], ["s"], name=E + "stem_activation_1/Sigmoid"),
             helper.make_node("Conv", ["s", inits[1].name], ["Conv__2626:0"], name="Conv__2626"),
             helper.make_node("Sigmoid", ["Conv__2626:0"], ["e"], name="Sigmoid__7"),
             helper.make_node("GlobalAveragePool", ["e"], ["m"], name=E + "block2a_se_squeeze_1/Mean"),
             helper.make_node("Conv", ["m", inits[2].name], ["r"], name=E + "block2a_se_reduce_1/convolution"),
             helper.make_node("Mul", ["e", "r"], ["y"], name=E + "block2a_se_excite_1/Mul")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    bvo.use_family("efficientnet_b0")
    try:
        groups = bvo.groups_of(helper.make_model(graph))
        assert groups["Conv__2604"] == "stem" and groups[E + "stem_activation_1/Sigmoid"] == "stem"
        assert groups["Conv__2626"] == "block 2a" and groups["Sigmoid__7"] == "block 2a"  # by weight, by producer
        assert groups[E + "block2a_se_squeeze_1/Mean"] == "block 2a SE"
        assert groups[E + "block2a_se_reduce_1/convolution"] == "block 2a SE"
        assert groups[E + "block2a_se_excite_1/Mul"] == "block 2a"  # ours folds it into the project conv
        assert bvo.group_of_name(E + "block7a_project_bn_1/batchnorm/add_1", groups) == "block 7a"
        assert bvo.group_of_name(E + "top_conv_1/convolution/WithoutBiases", groups) == "head 1x1"
    finally:
        bvo.use_family("mobilenet_v2")
