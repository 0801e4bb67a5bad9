"""unroll_control_flow: Loop with constant trip count / condition unrolled, If with a constant
condition inlined; checked against onnxruntime on the original model (onnx 1.23's
ReferenceEvaluator concatenates Loop scan outputs instead of stacking them), and the run-time
cases refused with errors naming the node."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler.errors import ConversionError
from tests.compiler.compiler_test_helpers import (F32, I64, assert_same_outputs, make_model, op_types, ort_run,
                                                  random_feeds, run_pass)

B = TensorProto.BOOL


def assert_same_as_onnxruntime(before, after):
    feeds = random_feeds(before)
    for want, got in zip(ort_run(before, feeds), ort_run(after, feeds)):
        assert want.shape == got.shape
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def accumulate_loop_model(trip_count=5, stop_after=None, opset=13):
    """h <- tanh(h @ W + x[i]) for i in range(trip_count), also scanning h out; with stop_after the
    condition (i + 1 < stop_after) ends it early."""
    body_nodes = [
        helper.make_node("Gather", ["x", "i"], ["x_i"], axis=0),
        helper.make_node("MatMul", ["h_in", "W"], ["hw"]),
        helper.make_node("Add", ["hw", "x_i"], ["pre"]),
        helper.make_node("Tanh", ["pre"], ["h_out"]),
        helper.make_node("Identity", ["h_out"], ["scan_h"]),
    ]
    if stop_after is None:
        body_nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    else:
        body_nodes += [helper.make_node("Add", ["i", "one"], ["next_i"]),
                       helper.make_node("Less", ["next_i", "stop"], ["cond_out"])]
    body = helper.make_graph(
        body_nodes, "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", B, []),
         helper.make_tensor_value_info("h_in", F32, [2, 3])],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("h_out", F32, [2, 3]),
         helper.make_tensor_value_info("scan_h", F32, [2, 3])])
    loop = helper.make_node("Loop", ["M", "c0", "h0"], ["h_final", "h_all"], body=body, name="the_loop")
    rng = np.random.default_rng(0)
    inits = {"M": np.array(trip_count, np.int64), "c0": np.array(True), "W": rng.standard_normal((3, 3)) * 0.5,
             "h0": np.zeros((2, 3), np.float32), "one": np.array(1, np.int64),
             "stop": np.array(stop_after if stop_after is not None else 0, np.int64)}
    inits["W"] = inits["W"].astype(np.float32)
    return make_model([loop], [("x", F32, [trip_count, 2, 3])], [("h_final", F32, None), ("h_all", F32, None)],
                      inits, opset=opset)


@pytest.mark.parametrize("opset", [11, 13])
def test_static_loop_is_unrolled_with_scan_outputs(opset):
    model = accumulate_loop_model(5, opset=opset)
    unrolled = run_pass(model, ["unroll_control_flow"])
    assert "Loop" not in op_types(unrolled)
    assert op_types(unrolled).count("Tanh") == 5
    assert_same_as_onnxruntime(model, unrolled)


def test_loop_condition_ending_early_unrolls_only_the_iterations_that_run():
    model = accumulate_loop_model(5, stop_after=3)
    unrolled = run_pass(model, ["unroll_control_flow"])
    assert op_types(unrolled).count("Tanh") == 3
    assert_same_as_onnxruntime(model, unrolled)


def test_run_time_trip_count_is_refused_naming_the_node():
    model = accumulate_loop_model(4)
    model.graph.initializer.remove(next(t for t in model.graph.initializer if t.name == "M"))
    model.graph.input.append(helper.make_tensor_value_info("M", I64, []))
    with pytest.raises(ConversionError, match=r"node 'the_loop' \(Loop\): the trip count 'M' is computed at run time"):
        run_pass(model, ["unroll_control_flow"])


@pytest.mark.parametrize("cond", [True, False])
def test_if_with_constant_condition_is_inlined(cond):
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", F32, [2, 3])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                               [helper.make_tensor_value_info("e", F32, [2, 3])])
    node = helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="branch")
    model = make_model([node], [("x", F32, [2, 3])], [("y", F32, None)], {"c": np.array(cond)})
    inlined = run_pass(model, ["unroll_control_flow"])
    assert "If" not in op_types(inlined)
    assert ("Relu" if cond else "Neg") in op_types(inlined)
    assert_same_outputs(model, inlined, random_feeds(model))


def test_if_with_run_time_condition_is_refused():
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["o"])], "b", [],
                          [helper.make_tensor_value_info("o", F32, [2])])
    node = helper.make_node("If", ["c"], ["y"], then_branch=g, else_branch=g, name="branch")
    model = make_model([node], [("x", F32, [2]), ("c", B, [])], [("y", F32, None)])
    with pytest.raises(ConversionError, match=r"node 'branch' \(If\): the condition 'c' is computed at run time"):
        run_pass(model, ["unroll_control_flow"])
