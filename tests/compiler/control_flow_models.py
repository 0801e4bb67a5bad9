"""Small ONNX models with run-time control flow (If on a computed condition, Loop with a
data-dependent condition or trip count, If nested in a Loop, Loop with scan outputs), built
with onnx.helper, shared by the compiler and runtime tests."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

F32, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _model(nodes, inputs, outputs, inits=None, opset=13):
    graph = helper.make_graph(nodes, "control_flow", [helper.make_tensor_value_info(*i) for i in inputs],
                              [helper.make_tensor_value_info(*o) for o in outputs],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in (inits or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def if_model(else_shape=(2, 3), opset=13):
    """z = relu(sum(x) > 0 ? x * 2 + b : -x), y also an output; x [2, 3]."""
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "two"], ["t0"]),
                                helper.make_node("Add", ["t0", "b"], ["t_out"])], "then", [],
                               [helper.make_tensor_value_info("t_out", F32, [2, 3])],
                               [numpy_helper.from_array(np.float32(2.0), "two")])
    else_nodes = [helper.make_node("Neg", ["x"], ["e_out"])]
    if tuple(else_shape) != (2, 3):
        else_nodes = [helper.make_node("ReduceSum", ["x"], ["e_out"], keepdims=0, axes=[1])] if opset < 13 else [
            helper.make_node("ReduceSum", ["x", "axis1"], ["e_out"], keepdims=0)]
    else_g = helper.make_graph(else_nodes, "else", [], [helper.make_tensor_value_info("e_out", F32, None)])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="the_if"),
             helper.make_node("Relu", ["y"], ["z"])]
    inits = {"zero": np.float32(0), "b": np.arange(3, dtype=np.float32), "axis1": np.array([1], np.int64)}
    return _model(nodes, [("x", F32, [2, 3])], [("z", F32, None), ("y", F32, None)], inits, opset)


def while_model():
    """h <- h * 0.5 + x while sum(h) < limit (and fewer than 50 iterations): a data-dependent
    condition; outputs the final h and the iteration count."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["h_in", "half"], ["hh"]),
         helper.make_node("Add", ["hh", "x"], ["h_out"]),
         helper.make_node("Add", ["n_in", "one"], ["n_out"]),
         helper.make_node("ReduceSum", ["h_out"], ["total"], keepdims=0),
         helper.make_node("Less", ["total", "limit"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", B, []),
         helper.make_tensor_value_info("h_in", F32, [2, 2]), helper.make_tensor_value_info("n_in", I64, [])],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("h_out", F32, [2, 2]),
         helper.make_tensor_value_info("n_out", I64, [])])
    nodes = [helper.make_node("Loop", ["M", "", "h0", "n0"], ["h_final", "n_final"], body=body, name="the_while")]
    inits = {"M": np.array(50, np.int64), "half": np.float32(0.5), "one": np.array(1, np.int64),
             "h0": np.zeros((2, 2), np.float32), "n0": np.array(0, np.int64)}
    return _model(nodes, [("x", F32, [2, 2]), ("limit", F32, [])], [("h_final", F32, None), ("n_final", I64, None)],
                  inits)


def run_time_trip_count_model():
    """acc <- acc + x * i for i < M, M a graph input (carried values only); cond starts from an input."""
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=F32),
         helper.make_node("Mul", ["x", "fi"], ["xi"]),
         helper.make_node("Add", ["acc_in", "xi"], ["acc_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", B, []),
         helper.make_tensor_value_info("acc_in", F32, [3])],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("acc_out", F32, [3])])
    nodes = [helper.make_node("Loop", ["M", "go", "acc0"], ["acc"], body=body, name="counted")]
    return _model(nodes, [("x", F32, [3]), ("M", I64, []), ("go", B, [])], [("acc", F32, None)],
                  {"acc0": np.zeros(3, np.float32)})


def if_in_loop_model():
    """for i < M (M = sum of an int input, so run time): v <- i even ? v + x : v * 0.5 (an If
    on the iteration number, nested in the body), also a swap of two carried values."""
    then_g = helper.make_graph([helper.make_node("Add", ["v_in", "x"], ["v_even"])], "even", [],
                               [helper.make_tensor_value_info("v_even", F32, [2])])
    else_g = helper.make_graph([helper.make_node("Mul", ["v_in", "half"], ["v_odd"])], "odd", [],
                               [helper.make_tensor_value_info("v_odd", F32, [2])])
    body = helper.make_graph(
        [helper.make_node("Div", ["i", "two"], ["half_i"]),  # i even <=> (i / 2) * 2 == i
         helper.make_node("Mul", ["half_i", "two"], ["twice"]),
         helper.make_node("Equal", ["twice", "i"], ["even"]),
         helper.make_node("If", ["even"], ["v_out"], then_branch=then_g, else_branch=else_g, name="inner_if"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", B, []),
         helper.make_tensor_value_info("v_in", F32, [2]), helper.make_tensor_value_info("a_in", F32, [2]),
         helper.make_tensor_value_info("b_in", F32, [2])],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("v_out", F32, [2]),
         helper.make_tensor_value_info("b_in", F32, [2]), helper.make_tensor_value_info("a_in", F32, [2])])
    nodes = [helper.make_node("ReduceSum", ["steps"], ["M"], keepdims=0),
             helper.make_node("Loop", ["M", "", "v0", "a", "b"], ["v", "a_final", "b_final"], body=body,
                              name="outer_loop")]
    inits = {"v0": np.zeros(2, np.float32), "two": np.array(2, np.int64), "half": np.float32(0.5)}
    return _model(nodes, [("x", F32, [2]), ("steps", I64, [2]), ("a", F32, [2]), ("b", F32, [2])],
                  [("v", F32, None), ("a_final", F32, None), ("b_final", F32, None)], inits)


def loop_result_viewing_a_body_tensor_model():
    """h <- reshape(h * 0.5 + x) for i < M (M an input), the body computing more temporaries
    after that reshape: the carried result is a view of a body tensor whose bytes the later
    temporaries may not take, since the Loop step reads the result after the body."""
    body = helper.make_graph(
        [helper.make_node("Mul", ["h_in", "half"], ["hh"]),
         helper.make_node("Add", ["hh", "x"], ["pre"]),
         helper.make_node("Reshape", ["pre", "shape"], ["h_out"]),
         helper.make_node("Mul", ["x", "x"], ["sq"]),
         helper.make_node("Add", ["sq", "x"], ["sq2"]),
         helper.make_node("ReduceSum", ["sq2"], ["total"], keepdims=0),
         helper.make_node("Less", ["total", "limit"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", B, []),
         helper.make_tensor_value_info("h_in", F32, [4])],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("h_out", F32, [4])])
    nodes = [helper.make_node("Loop", ["M", "", "h0"], ["h_final"], body=body, name="viewing_loop")]
    inits = {"half": np.float32(0.5), "h0": np.zeros(4, np.float32), "shape": np.array([4], np.int64)}
    return _model(nodes, [("x", F32, [4]), ("limit", F32, []), ("M", I64, [])], [("h_final", F32, None)], inits)


def scan_loop_model(trips=6):
    """h <- tanh(h @ W + x[i]) for a constant trip count, scanning h out (a condition that
    stays true): static M, so scan outputs have a static shape."""
    body = helper.make_graph(
        [helper.make_node("Gather", ["x", "i"], ["x_i"], axis=0),
         helper.make_node("MatMul", ["h_in", "W"], ["hw"]),
         helper.make_node("Add", ["hw", "x_i"], ["pre"]),
         helper.make_node("Tanh", ["pre"], ["h_out"]),
         helper.make_node("Identity", ["h_out"], ["scan_h"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", B, []),
         helper.make_tensor_value_info("h_in", F32, [2, 3])],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("h_out", F32, [2, 3]),
         helper.make_tensor_value_info("scan_h", F32, [2, 3])])
    rng = np.random.default_rng(0)
    inits = {"M": np.array(trips, np.int64), "c0": np.array(True),
             "W": (rng.standard_normal((3, 3)) * 0.5).astype(np.float32), "h0": np.zeros((2, 3), np.float32)}
    nodes = [helper.make_node("Loop", ["M", "c0", "h0"], ["h_final", "h_all"], body=body, name="scan_loop")]
    return _model(nodes, [("x", F32, [trips, 2, 3])], [("h_final", F32, None), ("h_all", F32, None)], inits)


def loop_in_loop_in_if_model():
    """n = sum(steps); y = n > 0 ? (n times: (n times: t += x)) : -x — a Loop nested in a Loop
    nested in an If branch, every trip count known only at run time."""
    inner_body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x"], ["s_out"]), helper.make_node("Identity", ["c_in"], ["c_out"])], "inner",
        [helper.make_tensor_value_info("j", I64, []), helper.make_tensor_value_info("c_in", B, []),
         helper.make_tensor_value_info("s_in", F32, [3])],
        [helper.make_tensor_value_info("c_out", B, []), helper.make_tensor_value_info("s_out", F32, [3])])
    outer_body = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "t_in"], ["t_out"], body=inner_body, name="inner_loop"),
         helper.make_node("Identity", ["cc_in"], ["cc_out"])], "outer",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cc_in", B, []),
         helper.make_tensor_value_info("t_in", F32, [3])],
        [helper.make_tensor_value_info("cc_out", B, []), helper.make_tensor_value_info("t_out", F32, [3])])
    then_g = helper.make_graph([helper.make_node("Loop", ["n", "", "x"], ["r"], body=outer_body, name="outer_loop")],
                               "then", [], [helper.make_tensor_value_info("r", F32, [3])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["nx"])], "else", [],
                               [helper.make_tensor_value_info("nx", F32, [3])])
    nodes = [helper.make_node("ReduceSum", ["steps"], ["n"], keepdims=0),
             helper.make_node("Greater", ["n", "zero"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="top_if")]
    return _model(nodes, [("x", F32, [3]), ("steps", I64, [2])], [("y", F32, None)], {"zero": np.array(0, np.int64)})


def constant_branch_model():
    """y = max(x) > 0 ? [1, 2, 3] (a constant) : x."""
    then_g = helper.make_graph([], "then", [], [helper.make_tensor_value_info("k", F32, [3])],
                               [numpy_helper.from_array(np.array([1, 2, 3], np.float32), "k")])
    else_g = helper.make_graph([helper.make_node("Identity", ["x"], ["xi"])], "else", [],
                               [helper.make_tensor_value_info("xi", F32, [3])])
    nodes = [helper.make_node("ReduceMax", ["x"], ["mx"], keepdims=0), helper.make_node("Greater", ["mx", "z"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g, name="constant_if")]
    return _model(nodes, [("x", F32, [3])], [("y", F32, None)], {"z": np.float32(0)})
