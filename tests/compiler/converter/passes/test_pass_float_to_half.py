import numpy as np
from onnx import TensorProto, helper, numpy_helper

from compiler_test_helpers import F16, F32, I64, assert_same_outputs, make_model, random_feeds, run_pass


def _elem(vi):
    return vi.type.tensor_type.elem_type


def test_float_tensors_become_half_and_ints_are_untouched():
    rng = np.random.default_rng(0)
    nodes = [helper.make_node("MatMul", ["X", "W"], ["h"]),
             helper.make_node("Cast", ["idx"], ["idxf"], to=TensorProto.FLOAT),
             helper.make_node("Add", ["h", "idxf"], ["O"]),
             helper.make_node("Add", ["idx", "one"], ["P"])]
    model = make_model(nodes, [("X", F32, [2, 3]), ("idx", I64, [2, 4])], [("O", F32, [2, 4]), ("P", I64, [2, 4])],
                       {"W": rng.standard_normal((3, 4)).astype(np.float32), "one": np.array(1, np.int64)},
                       value_info=[helper.make_tensor_value_info("h", F32, [2, 4])])
    out = run_pass(model, ["float_to_half", "shape_inference"], precision="fp16")
    inits = {t.name: t.data_type for t in out.graph.initializer}
    assert inits == {"W": TensorProto.FLOAT16, "one": TensorProto.INT64}
    assert [_elem(i) for i in out.graph.input] == [F16, I64]
    assert [_elem(o) for o in out.graph.output] == [F16, I64]
    assert out.graph.node[1].attribute[0].i == TensorProto.FLOAT16
    assert {vi.name: _elem(vi) for vi in out.graph.value_info}["h"] == F16
    feeds = random_feeds(model)
    half_feeds = {"X": feeds["X"].astype(np.float16), "idx": feeds["idx"]}
    assert_same_outputs(model, out, feeds, rtol=1e-2, atol=1e-2, after_feeds=half_feeds)


def test_only_with_fp16_precision():
    model = make_model([helper.make_node("Relu", ["X"], ["O"])], [("X", F32, [2])], [("O", F32, [2])])
    assert run_pass(model, "float_to_half", precision="fp32") == model


def test_out_of_range_values_saturate_instead_of_becoming_inf():
    model = make_model([helper.make_node("Add", ["X", "W"], ["O"])], [("X", F32, [3])], [("O", F32, [3])],
                       {"W": np.array([1e6, -1e6, np.inf], np.float32)})
    out = run_pass(model, "float_to_half", precision="fp16")
    w = numpy_helper.to_array(out.graph.initializer[0])
    assert w.dtype == np.float16 and w.tolist() == [65504.0, -65504.0, np.inf]


def test_constant_nodes_and_resize_scales():
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    nodes = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.ones((1, 1, 2, 2), np.float32))),
             helper.make_node("Add", ["X", "c"], ["a"]),
             helper.make_node("Resize", ["a", "", "scales"], ["O"], mode="nearest")]
    model = make_model(nodes, [("X", F32, [1, 1, 2, 2])], [("O", F32, [1, 1, 4, 4])])
    model.graph.initializer.append(scales)
    out = run_pass(model, ["float_to_half", "shape_inference"], precision="fp16")
    assert out.graph.node[0].attribute[0].t.data_type == TensorProto.FLOAT16
    assert out.graph.initializer[0].data_type == TensorProto.FLOAT  # Resize requires float32 scales
    feeds = random_feeds(model)
    assert_same_outputs(model, out, feeds, rtol=1e-2, atol=1e-2, after_feeds={"X": feeds["X"].astype(np.float16)})


def test_constant_read_by_resize_scales_and_by_arithmetic_is_split():
    nodes = [helper.make_node("Mul", ["X", "s"], ["a"]),
             helper.make_node("Resize", ["a", "", "s"], ["O"], mode="nearest")]
    model = make_model(nodes, [("X", F32, [1, 1, 4, 4])], [("O", F32, [1, 1, 4, 4])],
                       {"s": np.array([1, 1, 1, 1], np.float32)})
    out = run_pass(model, ["float_to_half", "shape_inference"], precision="fp16")
    inits = {t.name: t.data_type for t in out.graph.initializer}
    assert inits == {"s": TensorProto.FLOAT, "s_fp16": TensorProto.FLOAT16}
    assert list(out.graph.node[0].input) == ["X", "s_fp16"] and list(out.graph.node[1].input) == ["a", "", "s"]
