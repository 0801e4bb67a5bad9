"""The peers' kernels are charged to the class of the step of ours that computes their ONNX nodes
(op_classes.nodes_by_step / peer_node / charged_class, op_profiles.graph_tensor and Charging): a
swish fused into our stem convolution, a LayerNorm fused into our depthwise convolution, and a
residual sum into a 1x1 convolution are compared with the peer's convolution plus those nodes,
whichever separate kernels the peer ran them in."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "benchmarks"))

from op_classes import charged_class, nodes_by_step, peer_node  # noqa: E402
from op_profiles import graph_tensor  # noqa: E402

# stem: conv -> sigmoid, mul (swish) -> GlobalAveragePool; the residual block: 1x1 conv + Add
SWISH_GRAPH = [("stem", ["x", "w"], ["c"]), ("sig", ["c"], ["s"]), ("swish", ["c", "s"], ["a"]),
               ("proj", ["a", "w2"], ["p"]), ("add", ["p", "a"], ["r"]), ("gap", ["r"], ["y"])]
SOURCES = {"x", "w", "w2"}


def test_a_fused_step_computes_the_nodes_between_what_it_reads_and_writes():
    steps = {"stem": ["a"], "proj": ["r"], "gap": ["y"]}  # ours: stem+swish, proj+sum, the mean
    owner = nodes_by_step(SWISH_GRAPH, steps, SOURCES)
    assert owner == {"stem": "stem", "sig": "stem", "swish": "stem", "proj": "proj", "add": "proj", "gap": "gap"}


def test_a_step_does_not_walk_past_a_tensor_another_step_writes():
    # unfused: every node its own step; the Add reads "a", which the swish step wrote
    steps = {"stem": ["c"], "sig": ["s"], "swish": ["a"], "proj": ["p"], "add": ["r"], "gap": ["y"]}
    owner = nodes_by_step(SWISH_GRAPH, steps, SOURCES)
    assert owner == {name: name for name, _, _ in SWISH_GRAPH}


def test_a_node_no_step_reaches_has_no_owner():
    steps = {"gap": ["y"], "proj": ["r"], "stem": ["a"]}
    owner = nodes_by_step(SWISH_GRAPH + [("dead", ["x"], ["unused"])], steps, SOURCES)
    assert "dead" not in owner and owner["sig"] == "stem"


def test_peer_kernel_names_are_traced_to_onnx_nodes():
    names = {name for name, _, _ in SWISH_GRAPH}
    producer = {out: name for name, _, outs in SWISH_GRAPH for out in outs}
    assert peer_node("sig", names, producer) == "sig"                  # onnxruntime keeps the node's name
    assert peer_node("a_nchwc", names, producer) == "swish"            # its NCHWc rewrite: "<output>_nchwc"
    assert peer_node("swish/WithoutBiases", names, producer) == "swish"  # OpenVINO's "<node>/<part>"
    assert peer_node("r", names, producer) == "add"                    # or the output's name
    assert peer_node("ReorderOutput_12", names, producer) is None      # a kernel of the peer's own


def test_the_peers_swish_and_sum_are_charged_to_our_convolutions():
    owner = nodes_by_step(SWISH_GRAPH, {"stem": ["a"], "proj": ["r"], "gap": ["y"]}, SOURCES)
    ours = {"stem": "Conv 3x3", "proj": "Conv 1x1", "gap": "Pooling/reduce"}
    class_of_node = {node: ours[step] for node, step in owner.items()}
    assert charged_class("Elementwise", "sig", class_of_node) == "Conv 3x3"
    assert charged_class("Elementwise", "swish", class_of_node) == "Conv 3x3"
    assert charged_class("Elementwise", "add", class_of_node) == "Conv 1x1"
    assert charged_class("Pooling/reduce", "gap", class_of_node) == "Pooling/reduce"
    assert charged_class("Layout/copy", None, class_of_node) == "Layout/copy"  # a reorder only the peer runs


def test_a_layernorm_chain_after_a_depthwise_conv_is_charged_to_it():
    # ConvNeXt: depthwise 7x7 -> ReduceMean / Sub / Mul / Sqrt / Reciprocal ... -> Transpose, ours
    # one channels-last depthwise step writing the Transpose's output
    graph = [("dw", ["x", "w"], ["d"]), ("mean", ["d"], ["m"]), ("sub", ["d", "m"], ["c"]),
             ("sq", ["c", "c"], ["v0"]), ("var", ["v0"], ["v"]), ("sqrt", ["v"], ["sd"]),
             ("recip", ["sd"], ["r"]), ("norm", ["c", "r"], ["n"]), ("tr", ["n"], ["t"]),
             ("mm", ["t", "w2"], ["y"])]
    owner = nodes_by_step(graph, {"dw": ["t"], "mm": ["y"]}, {"x", "w", "w2"})
    assert {n for n, s in owner.items() if s == "dw"} == {"dw", "mean", "sub", "sq", "var", "sqrt", "recip",
                                                           "norm", "tr"}
    assert owner["mm"] == "mm"


def test_our_layout_copies_stand_for_their_graph_tensor():
    assert graph_tensor("block/act/mul_1:0__nchwc") == "block/act/mul_1:0"
    assert graph_tensor("model/Add:0_untransposed") == "model/Add:0"
    assert graph_tensor("model/Add:0_untransposed_2") == "model/Add:0"
    assert graph_tensor("ln/add_2_channels_last_normalized") == "ln/add_2:0"
    assert graph_tensor("ln/add_2_channels_last") == "ln/add_2_channels_last"  # the LN's input, no graph name
    assert graph_tensor("plain:0") == "plain:0"


def test_a_kernel_the_peer_named_itself_is_traced_by_the_tensor_it_writes():
    from onnx import TensorProto, helper
    from op_profiles import Charging
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="stem"),
             helper.make_node("Sigmoid", ["c"], ["s"], name="sig"),
             helper.make_node("Mul", ["c", "s"], ["a"], name="swish"),
             helper.make_node("GlobalAveragePool", ["a"], ["y"], name="gap")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None),
                                           helper.make_tensor_value_info("w", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    ours = {"step_outputs": {"stem": ["a"], "gap": ["y"]},
            "class_of_step": {"stem": "Conv 3x3", "gap": "Pooling/reduce"}}
    charging = Charging(helper.make_model(graph), ours)
    # onnxruntime's QuickGelu for x * sigmoid(x): a name of its own, the Mul's output
    assert charging("QuickGelu_token_7", "other: QuickGelu", ["a"]) == "Conv 3x3"
    assert charging("QuickGelu_token_7", "other: QuickGelu") == "other: QuickGelu"
    assert charging("gap", "Pooling/reduce") == "Pooling/reduce"
    # a reorder onnxruntime added writes the graph tensor it moves back to NCHW: still its own
    assert charging("ReorderOutput_3", "Layout/copy", ["a"]) == "Layout/copy"


def test_projections_merged_into_a_step_of_their_own_are_charged_to_it():
    # q/k/v projections of the same x, an attention reading them; ours: one GEMM writing a tensor of
    # its own ("qkv"), which the fused attention reads; the residual Add reads x too, but its output
    # is a tensor a step writes (the output projection's)
    graph = [("q", ["x", "wq"], ["tq"]), ("k", ["x", "wk"], ["tk"]), ("v", ["x", "wv"], ["tv"]),
             ("att", ["tq", "tk", "tv"], ["o"]), ("proj", ["o", "wo"], ["p"]), ("add", ["p", "x"], ["y"])]
    sources = {"x", "wq", "wk", "wv", "wo"}
    outputs = {"qkv_gemm": ["qkv"], "attention": ["o"], "out_proj": ["y"]}
    inputs = {"qkv_gemm": ["x", "w_qkv"], "attention": ["qkv"], "out_proj": ["o", "wo", "x"]}
    assert nodes_by_step(graph, outputs, sources)["q"] == "attention"  # without the inputs: the walk's
    owner = nodes_by_step(graph, outputs, sources, inputs)
    assert owner == {"q": "qkv_gemm", "k": "qkv_gemm", "v": "qkv_gemm", "att": "attention", "proj": "out_proj",
                     "add": "out_proj"}
