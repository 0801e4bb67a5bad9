"""unroll_control_flow: Loop with constant trip count / condition unrolled, If with a constant
condition inlined; checked against onnxruntime on the original model (onnx 1.23's
ReferenceEvaluator concatenates Loop scan outputs instead of stacking them); Scan always unrolled
(opset 8, 9, 11: axes and directions); run-time If/Loop kept for the lowering's If/Loop steps,
or refused with errors naming the node when their outputs could have no static shape."""
import numpy as np
import pytest
from onnx import TensorProto, helper

import compiler.converter.passes.unroll_control_flow as unroll_module
from compiler.errors import ConversionError
from tests.compiler.control_flow_models import if_model
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


def test_run_time_trip_count_with_scan_outputs_is_refused_naming_the_node():
    model = accumulate_loop_model(4)
    model.graph.initializer.remove(next(t for t in model.graph.initializer if t.name == "M"))
    model.graph.input.append(helper.make_tensor_value_info("M", I64, []))
    with pytest.raises(ConversionError, match=r"node 'the_loop' \(Loop\): scan output 'h_all' has a data-dependent "
                                              r"length \(the trip count 'M' is computed at run time.*no static shape"):
        run_pass(model, ["unroll_control_flow"])


def test_data_dependent_condition_with_scan_outputs_is_refused():
    model = accumulate_loop_model(5, stop_after=3)
    stop = next(t for t in model.graph.initializer if t.name == "stop")
    model.graph.initializer.remove(stop)
    model.graph.input.append(helper.make_tensor_value_info("stop", I64, []))
    with pytest.raises(ConversionError, match=r"scan output 'h_all' has a data-dependent length \(the loop condition "
                                              r"depends on values computed at run time \(iteration 0\), so the loop "
                                              r"may stop before its trip count of 5\)"):
        run_pass(model, ["unroll_control_flow"])


def test_run_time_loop_without_scan_outputs_is_kept():
    model = accumulate_loop_model(4)
    model.graph.initializer.remove(next(t for t in model.graph.initializer if t.name == "M"))
    model.graph.input.append(helper.make_tensor_value_info("M", I64, []))
    loop = model.graph.node[0]
    del loop.output[1:]  # only the carried value
    del model.graph.output[1:]
    kept = run_pass(model, ["unroll_control_flow"])
    assert op_types(kept) == ["Loop"]


def test_static_loop_over_the_unroll_limit_is_kept_for_run_time(monkeypatch):
    monkeypatch.setattr(unroll_module, "MAX_UNROLLED_ITERATIONS", 3)
    kept = run_pass(accumulate_loop_model(5), ["unroll_control_flow"])
    assert op_types(kept) == ["Loop"]
    assert not [t for t in kept.graph.initializer if "/iter" in t.name]  # the partial unrolling is dropped


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


def test_if_with_run_time_condition_is_kept():
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["o"])], "b", [],
                          [helper.make_tensor_value_info("o", F32, [2])])
    node = helper.make_node("If", ["c"], ["y"], then_branch=g, else_branch=g, name="branch")
    model = make_model([node], [("x", F32, [2]), ("c", B, [])], [("y", F32, None)])
    assert op_types(run_pass(model, ["unroll_control_flow"])) == ["If"]


def test_run_time_if_whose_branches_disagree_is_refused_naming_output_and_shapes():
    model = if_model(else_shape=(2,))
    with pytest.raises(ConversionError, match=r"node 'the_if' \(If\): output 'y' is float32 \[2, 3\] in then_branch "
                                              r"but float32 \[2\] in else_branch"):
        run_pass(model, ["unroll_control_flow"])


# ---------------------------------------------------------------- Scan (always unrolled)


def scan_model(opset=9, input_axis=0, input_reverse=0, output_axis=0, output_reverse=0, length=4):
    """Running sum over slices of x along `input_axis`, scanning the sums and x * 2 out."""
    body = helper.make_graph(
        [helper.make_node("Add", ["sum_in", "x_t"], ["sum_out"]),
         helper.make_node("Mul", ["x_t", "two"], ["doubled"]),
         helper.make_node("Identity", ["sum_out"], ["scan_sum"])],
        "body",
        [helper.make_tensor_value_info("sum_in", F32, [2, 3]), helper.make_tensor_value_info("x_t", F32, [2, 3])],
        [helper.make_tensor_value_info("sum_out", F32, [2, 3]), helper.make_tensor_value_info("scan_sum", F32, [2, 3]),
         helper.make_tensor_value_info("doubled", F32, [2, 3])])
    shape = [2, 3]
    shape.insert(input_axis if input_axis >= 0 else 3 + input_axis, length)
    node = helper.make_node("Scan", ["s0", "x"], ["s_final", "sums", "doubles"], body=body, num_scan_inputs=1,
                            scan_input_axes=[input_axis], scan_input_directions=[input_reverse],
                            scan_output_axes=[output_axis, output_axis], scan_output_directions=[output_reverse, 0],
                            name="the_scan")
    return make_model([node], [("x", F32, shape)], [("s_final", F32, None), ("sums", F32, None),
                                                    ("doubles", F32, None)],
                      {"s0": np.ones((2, 3), np.float32), "two": np.array(2, np.float32)}, opset=opset)


@pytest.mark.parametrize("input_axis,input_reverse,output_axis,output_reverse", [
    (0, 0, 0, 0), (1, 1, 0, 0), (2, 0, 2, 1), (0, 1, 1, 1)])
def test_scan9_is_unrolled_with_axes_and_directions(input_axis, input_reverse, output_axis, output_reverse):
    model = scan_model(9, input_axis, input_reverse, output_axis, output_reverse)
    unrolled = run_pass(model, ["unroll_control_flow"])
    assert "Scan" not in op_types(unrolled)
    assert op_types(unrolled).count("Mul") == 4
    assert_same_as_onnxruntime(model, unrolled)


def test_scan11_negative_axes():
    model = scan_model(11, input_axis=-1, output_axis=-1, output_reverse=1)
    unrolled = run_pass(model, ["unroll_control_flow"])
    assert "Scan" not in op_types(unrolled)
    assert_same_as_onnxruntime(model, unrolled)


def test_scan8_batch_axis_without_sequence_lens():
    body = helper.make_graph(
        [helper.make_node("Add", ["sum_in", "x_t"], ["sum_out"]), helper.make_node("Identity", ["sum_out"], ["scan"])],
        "body", [helper.make_tensor_value_info("sum_in", F32, [2]), helper.make_tensor_value_info("x_t", F32, [2])],
        [helper.make_tensor_value_info("sum_out", F32, [2]), helper.make_tensor_value_info("scan", F32, [2])])
    node = helper.make_node("Scan", ["", "s0", "x"], ["s_final", "sums"], body=body, num_scan_inputs=1,
                            directions=[1], name="scan8")
    model = make_model([node], [("x", F32, [3, 4, 2])], [("s_final", F32, None), ("sums", F32, None)],
                       {"s0": np.zeros((3, 2), np.float32)}, opset=8)
    unrolled = run_pass(model, ["unroll_control_flow"])
    assert "Scan" not in op_types(unrolled)
    assert_same_as_onnxruntime(model, unrolled)


def test_scan_with_a_non_static_input_is_refused():
    model = scan_model(9)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "T"
    with pytest.raises(ConversionError, match=r"node 'the_scan' \(Scan\): input 'x' has the non-static shape"):
        run_pass(model, ["unroll_control_flow"])
