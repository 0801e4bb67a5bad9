import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler.errors import LoweringError, UnsupportedOpError
from compiler.lowering_rules.registry import supported_ops
from compiler.lowering.weights import WeightStore
from compiler_test_helpers import F16, F32, I32, I64, fuse_and_lower, make_model


def _steps(model):
    graph = fuse_and_lower(model, WeightStore(), "test.onnx")
    return [(s.op, s.inputs, s.attrs) for s in graph.steps]


def _one(node, inputs, outputs, inits=None, opset=13):
    return _steps(make_model([node], inputs, outputs, inits, opset=opset))


def test_supported_ops_are_exactly_the_documented_ones():
    core_operators = ["Add", "Sub", "Mul", "Div", "MatMul", "Gemm", "Relu", "Sigmoid", "Tanh", "Softmax", "Concat",
              "Transpose", "Cast", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"]
    more_operators = [
        "Conv", "ConvTranspose", "BatchNormalization", "LayerNormalization", "MaxPool", "AveragePool",
        "GlobalAveragePool", "GlobalMaxPool", "Pow", "Clip", "LeakyRelu", "Elu", "Selu", "HardSigmoid", "Erf", "Exp",
        "Log", "Sqrt", "Reciprocal", "Neg", "Abs", "Gelu", "HardSwish", "Softplus", "Softsign", "LogSoftmax",
        "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceSumSquare",
        "ReduceLogSum", "ReduceLogSumExp", "Expand", "Tile", "Split", "Slice", "Gather", "GatherElements", "Pad",
        "Resize", "Upsample", "Where", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And",
        "Or", "Xor", "Shape", "Size", "Range", "ConstantOfShape"]
    # Recurrent layers, Einsum and control flow are checked by their own tests.
    own_tests = {"LSTM", "GRU", "Einsum", "Loop", "Scan", "If"}
    assert sorted(set(supported_ops()) - own_tests) == sorted(core_operators + more_operators)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("dtype", [F32, F16, I32, I64])
def test_binary_ops_keep_their_name_and_operands(op, dtype):
    assert _one(helper.make_node(op, ["A", "B"], ["C"]), [("A", dtype, [2, 3]), ("B", dtype, [3])],
                [("C", dtype, [2, 3])]) == [(op, ["A", "B"], {})]


def test_binary_op_on_an_unsupported_dtype():
    with pytest.raises(LoweringError, match="node 'add' \\(Add\\): input 'A' has dtype bool; the emulator's Add "
                                            "supports float32, float16, float64, int8, int16, int32, int64, uint8"):
        _one(helper.make_node("Add", ["A", "A"], ["C"], name="add"), [("A", TensorProto.BOOL, [2])],
             [("C", TensorProto.BOOL, [2])])


def test_gemm_attrs_are_always_present_and_c_is_optional():
    steps = _one(helper.make_node("Gemm", ["A", "B"], ["Y"], transA=1), [("A", F32, [3, 2]), ("B", F32, [3, 4])],
                 [("Y", F32, [2, 4])])
    assert steps == [("Gemm", ["A", "B"], {"alpha": 1.0, "beta": 1.0, "transA": 1, "transB": 0})]
    steps = _one(helper.make_node("Gemm", ["A", "B", "C"], ["Y"], alpha=0.5, beta=2.0, transB=1),
                 [("A", F32, [2, 3]), ("B", F32, [4, 3]), ("C", F32, [4])], [("Y", F32, [2, 4])])
    assert steps == [("Gemm", ["A", "B", "C"], {"alpha": 0.5, "beta": 2.0, "transA": 0, "transB": 1})]


def test_matmul():
    assert _one(helper.make_node("MatMul", ["A", "B"], ["Y"]), [("A", F16, [5, 2, 3]), ("B", F16, [3, 4])],
                [("Y", F16, [5, 2, 4])]) == [("MatMul", ["A", "B"], {})]


@pytest.mark.parametrize("opset, axis, expected", [(11, None, {"axis": 1, "coerce_2d": 1}),
                                                   (11, -1, {"axis": 2, "coerce_2d": 1}),
                                                   (13, None, {"axis": 2, "coerce_2d": 0}),
                                                   (13, -2, {"axis": 1, "coerce_2d": 0}),
                                                   (13, 0, {"axis": 0, "coerce_2d": 0})])
def test_softmax_axis_is_non_negative_and_coerce_2d_follows_the_opset(opset, axis, expected):
    kwargs = {} if axis is None else {"axis": axis}
    steps = _one(helper.make_node("Softmax", ["X"], ["Y"], **kwargs), [("X", F32, [2, 3, 4])],
                 [("Y", F32, [2, 3, 4])], opset=opset)
    assert steps == [("Softmax", ["X"], expected)]


def test_activations():
    for op in ("Relu", "Sigmoid", "Tanh"):
        assert _one(helper.make_node(op, ["X"], ["Y"]), [("X", F32, [4])], [("Y", F32, [4])]) == [(op, ["X"], {})]
    assert _one(helper.make_node("Relu", ["X"], ["Y"]), [("X", I32, [4])], [("Y", I32, [4])]) == [("Relu", ["X"], {})]
    with pytest.raises(LoweringError, match="Tanh supports float32, float16"):
        _one(helper.make_node("Tanh", ["X"], ["Y"]), [("X", TensorProto.DOUBLE, [4])], [("Y", TensorProto.DOUBLE, [4])])


def test_concat_axis_is_normalized():
    assert _one(helper.make_node("Concat", ["A", "B"], ["Y"], axis=-1), [("A", I64, [2, 1]), ("B", I64, [2, 3])],
                [("Y", I64, [2, 4])]) == [("Concat", ["A", "B"], {"axis": 1})]


def test_transpose_perm_is_filled_when_absent():
    assert _one(helper.make_node("Transpose", ["X"], ["Y"]), [("X", F32, [2, 3, 4])], [("Y", F32, [4, 3, 2])]) == \
        [("Transpose", ["X"], {"perm": [2, 1, 0]})]
    assert _one(helper.make_node("Transpose", ["X"], ["Y"], perm=[1, 0]), [("X", F32, [2, 3])],
                [("Y", F32, [3, 2])]) == [("Transpose", ["X"], {"perm": [1, 0]})]


def test_cast_to_is_a_dtype_name():
    assert _one(helper.make_node("Cast", ["X"], ["Y"], to=TensorProto.FLOAT16), [("X", I64, [2])],
                [("Y", F16, [2])]) == [("Cast", ["X"], {"to": "float16"})]
    with pytest.raises(LoweringError, match="cannot cast to string"):
        _one(helper.make_node("Cast", ["X"], ["Y"], to=TensorProto.STRING), [("X", I64, [2])],
             [("Y", TensorProto.STRING, [2])])


@pytest.mark.parametrize("node, inits, opset, out_shape", [
    (helper.make_node("Reshape", ["X", "s"], ["Y"]), {"s": np.array([6, -1], np.int64)}, 13, [6, 4]),
    (helper.make_node("Flatten", ["X"], ["Y"], axis=2), {}, 13, [6, 4]),
    (helper.make_node("Unsqueeze", ["X", "ax"], ["Y"]), {"ax": np.array([0], np.int64)}, 13, [1, 2, 3, 4]),
    (helper.make_node("Unsqueeze", ["X"], ["Y"], axes=[3]), {}, 11, [2, 3, 4, 1]),
    (helper.make_node("Identity", ["X"], ["Y"]), {}, 13, [2, 3, 4]),
])
def test_views_become_reshape_without_their_shape_operand(node, inits, opset, out_shape):
    steps = _one(node, [("X", F32, [2, 3, 4])], [("Y", F32, out_shape)], inits, opset=opset)
    assert steps == [("Reshape", ["X"], {})]


def test_squeeze_both_opsets():
    assert _one(helper.make_node("Squeeze", ["X", "ax"], ["Y"]), [("X", F32, [1, 3, 1])], [("Y", F32, [3, 1])],
                {"ax": np.array([0], np.int64)}) == [("Reshape", ["X"], {})]
    assert _one(helper.make_node("Squeeze", ["X"], ["Y"], axes=[0, 2]), [("X", F32, [1, 3, 1])], [("Y", F32, [3])],
                opset=11) == [("Reshape", ["X"], {})]


def test_reshape_shape_must_be_constant():
    with pytest.raises(LoweringError, match="node 'rs' \\(Reshape\\): input 'S' must be a constant"):
        _one(helper.make_node("Reshape", ["X", "S"], ["Y"], name="rs"), [("X", F32, [2, 3]), ("S", I64, [2])],
             [("Y", F32, [3, 2])])


def test_unsupported_op_error_lists_supported_ones():
    with pytest.raises(UnsupportedOpError) as e:
        _one(helper.make_node("Hardmax", ["X"], ["Y"], name="hardmax1"), [("X", F32, [1, 3])], [("Y", F32, [1, 3])])
    assert str(e.value).startswith("test.onnx: unsupported op 'Hardmax' (node 'hardmax1'); the emulator supports Abs, "
                                   "Add, And")
