"""fuse_elementwise_chain and the FusedElementwise kernel: connected elementwise nodes become
one FusedElementwise whose program runs them in one loop. Each case checks the graph after the
pass, then compiles the original model (the compile step runs the fusion) and compares the
emulator with onnxruntime running the original, unfused model, in fp32 and fp16."""
import numpy as np
import pytest
from onnx import helper, numpy_helper

from compiler import Compiler
from compiler.converter import Converter
from compiler.onnx_graph.internal_ops import DOMAIN
from compiler.options import CompilerOptions
from compiler_test_helpers import F32, make_model, op_types, ort_run, run_pass
from tf_popef_op.runtime import ModelRunner, RuntimeConfig

n = helper.make_node


def _feeds(model, seed=0):
    rng = np.random.default_rng(seed)
    return {i.name: (rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]) * 1.5
                     ).astype(np.float32) for i in model.graph.input}


def check(model, outputs=("Y",), fp16=True):
    """vs onnxruntime, and vs the emulator without kernel fusion."""
    feeds = _feeds(model)
    want = ort_run(model, feeds)
    got = ModelRunner(Compiler.compile(model), RuntimeConfig()).execute(feeds)
    unfused = ModelRunner(Compiler.compile(model, options=CompilerOptions(kernel_fusion=False)),
                          RuntimeConfig()).execute(feeds)
    for name, w in zip(outputs, want):
        scale = max(1.0, float(np.abs(w).max()))
        np.testing.assert_allclose(got[name], w, rtol=1e-5, atol=1e-5 * scale)
        np.testing.assert_allclose(got[name], unfused[name], rtol=1e-5, atol=1e-5 * scale)
    if fp16:
        half = Converter(precision="fp16").convert(model)
        got16 = ModelRunner(Compiler.compile(half), RuntimeConfig()).execute(
            {k: v.astype(np.float16) for k, v in feeds.items()})
        for name, w in zip(outputs, want):
            scale = max(1.0, float(np.abs(w).max()))
            np.testing.assert_allclose(got16[name].astype(np.float32), w, rtol=2e-2, atol=2e-2 * scale)


def program_of(model):
    (node,) = [x for x in model.graph.node if x.domain == DOMAIN]
    assert node.op_type == "FusedElementwise"
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}["program"].decode()


# Every op the pass fuses, with full, per-last-axis and scalar operands.
def every_op_model(shape=(2, 3, 40)):
    rng = np.random.default_rng(0)
    last = shape[-1]
    inits = {"row": rng.uniform(0.5, 1.5, last).astype(np.float32),
             "row3": rng.standard_normal((1, 1, last)).astype(np.float32) if len(shape) == 3 else
             rng.standard_normal(last).astype(np.float32),
             "half": np.float32(0.5), "two": np.array([2.0], np.float32), "lo": np.float32(-0.5),
             "hi": np.float32(2.5), "eps": np.float32(1e-3)}
    nodes = [n("Mul", ["X", "row"], ["a"]), n("Add", ["a", "half"], ["b"]), n("Sigmoid", ["b"], ["c"]),
             n("Mul", ["X", "c"], ["d"]), n("Clip", ["d", "lo", "hi"], ["e"]), n("Pow", ["e", "two"], ["f"]),
             n("Sub", ["f", "Z"], ["g"]), n("Div", ["g", "row"], ["h"]), n("Abs", ["h"], ["i"]),
             n("Add", ["i", "eps"], ["i2"]), n("Sqrt", ["i2"], ["j"]), n("Reciprocal", ["j"], ["k"]),
             n("Tanh", ["k"], ["l"]), n("Mul", ["l", "row3"], ["o"]), n("Neg", ["o"], ["p"]),
             n("Relu", ["Z"], ["q"]), n("Add", ["p", "q"], ["r"]), n("Erf", ["r"], ["s"]),
             n("Exp", ["s"], ["t"]), n("Log", ["t"], ["Y"])]
    return make_model(nodes, [("X", F32, list(shape)), ("Z", F32, list(shape))], [("Y", F32, list(shape))], inits,
                      opset=13)


@pytest.mark.parametrize("shape", [(2, 3, 40), (2, 1500), (5,), (3, 700, 8)])
def test_every_fusable_op_becomes_one_node(shape):
    model = every_op_model(shape)
    fused = run_pass(model, "fuse_elementwise_chain")
    assert op_types(fused) == ["FusedElementwise"]
    node = fused.graph.node[0]
    assert list(node.input)[:2] == ["X", "Z"]  # run-time tensors first
    assert program_of(fused).count(";") == len(model.graph.node) - 1
    check(model)


def test_program_text_of_a_swish_with_bias():
    nodes = [n("Sigmoid", ["X"], ["s"]), n("Mul", ["X", "s"], ["m"]), n("Mul", ["m", "k"], ["m2"]),
             n("Add", ["m2", "b"], ["Y"])]
    model = make_model(nodes, [("X", F32, [4, 6])], [("Y", F32, [4, 6])],
                       {"k": np.float32(0.5), "b": np.arange(6, dtype=np.float32)}, opset=13)
    fused = run_pass(model, "fuse_elementwise_chain")
    assert program_of(fused) == "sigmoid x0; mul x0 t0; mul t1 0.5; add t2 x1"
    assert list(fused.graph.node[0].input) == ["X", "b"]
    check(model)


def test_intermediate_with_an_outside_reader_splits_the_chain():
    """`b` is read by the chain and by a graph output: the chain before it and after it are
    separate groups (each of one output)."""
    nodes = [n("Neg", ["X"], ["a"]), n("Exp", ["a"], ["b"]), n("Add", ["b", "one"], ["c"]),
             n("Reciprocal", ["c"], ["Y"])]
    model = make_model(nodes, [("X", F32, [3, 5])], [("Y", F32, [3, 5]), ("b", F32, [3, 5])],
                       {"one": np.float32(1.0)}, opset=13)
    fused = run_pass(model, "fuse_elementwise_chain")
    assert op_types(fused) == ["FusedElementwise", "FusedElementwise"]
    assert [x.output[0] for x in fused.graph.node] == ["b", "Y"]
    check(model, outputs=("Y", "b"))


def test_diamond_reading_x_twice_is_one_group():
    nodes = [n("Tanh", ["X"], ["a"]), n("Sigmoid", ["X"], ["b"]), n("Mul", ["a", "b"], ["Y"])]
    model = make_model(nodes, [("X", F32, [2, 8])], [("Y", F32, [2, 8])], opset=13)
    fused = run_pass(model, "fuse_elementwise_chain")
    assert op_types(fused) == ["FusedElementwise"] and list(fused.graph.node[0].input) == ["X"]
    check(model)


def test_group_with_two_outside_outputs_is_left_alone():
    """a feeds the chain and another (unfusable) node: the group would need two outputs."""
    nodes = [n("Tanh", ["X"], ["a"]), n("Sigmoid", ["a"], ["b"]), n("Mul", ["a", "b"], ["Y"]),
             n("Softmax", ["a"], ["W"])]
    model = make_model(nodes, [("X", F32, [2, 8])], [("Y", F32, [2, 8]), ("W", F32, [2, 8])], opset=13)
    fused = run_pass(model, "fuse_elementwise_chain")
    assert op_types(fused) == ["Tanh", "FusedElementwise", "Softmax"]
    check(model, outputs=("Y", "W"))


@pytest.mark.parametrize("case", ["other_broadcast", "integer", "runtime_row_vector", "single_node"])
def test_what_stays_unfused(case):
    if case == "other_broadcast":  # a [3, 1] operand broadcasts along the first axis: not per-last-axis
        nodes = [n("Add", ["X", "col"], ["a"]), n("Relu", ["a"], ["Y"])]
        model = make_model(nodes, [("X", F32, [3, 4])], [("Y", F32, [3, 4])],
                           {"col": np.ones((3, 1), np.float32)}, opset=13)
        assert op_types(run_pass(model, "fuse_elementwise_chain")) == ["Add", "Relu"]
    elif case == "integer":
        from compiler_test_helpers import I64
        nodes = [n("Add", ["X", "X"], ["a"]), n("Mul", ["a", "X"], ["Y"])]
        model = make_model(nodes, [("X", I64, [3, 4])], [("Y", I64, [3, 4])], opset=13)
        assert op_types(run_pass(model, "fuse_elementwise_chain")) == ["Add", "Mul"]
    elif case == "runtime_row_vector":  # a run-time [4] operand: only constants may broadcast
        nodes = [n("Add", ["X", "V"], ["a"]), n("Relu", ["a"], ["Y"])]
        model = make_model(nodes, [("X", F32, [3, 4]), ("V", F32, [4])], [("Y", F32, [3, 4])], opset=13)
        assert op_types(run_pass(model, "fuse_elementwise_chain")) == ["Add", "Relu"]
    else:
        model = make_model([n("Relu", ["X"], ["Y"])], [("X", F32, [3, 4])], [("Y", F32, [3, 4])], opset=13)
        assert op_types(run_pass(model, "fuse_elementwise_chain")) == ["Relu"]


def test_epilogue_fusion_takes_precedence():
    """MatMul + bias + Gelu chain is fuse_epilogue's; fuse_elementwise_chain runs after it."""
    from compiler.kernel_fusion import KERNEL_FUSION_PIPELINE
    assert KERNEL_FUSION_PIPELINE.index("fuse_epilogue") < KERNEL_FUSION_PIPELINE.index("fuse_elementwise_chain")
    rng = np.random.default_rng(1)
    nodes = [n("MatMul", ["X", "W"], ["P"]), n("Sigmoid", ["P"], ["s"]), n("Mul", ["P", "s"], ["Y"])]
    model = make_model(nodes, [("X", F32, [3, 4])], [("Y", F32, [3, 5])],
                       {"W": rng.standard_normal((4, 5)).astype(np.float32)}, opset=13)
    fused = run_pass(model, KERNEL_FUSION_PIPELINE)
    assert op_types(fused) == ["FusedMatMul"]
