"""ONNX LSTM and GRU compiled and run on the emulator, against onnxruntime (layout 0) and onnx's
ReferenceEvaluator (layout 1, which onnxruntime does not implement): every direction, both
layouts, initial states, peepholes, clip, linear_before_reset, non-default activations, fp16."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from compiler import Compiler
from compiler.converter import Converter
from compiler.errors import LoweringError
from tests.compiler.compiler_test_helpers import reference_run
from tf_popef_op.runtime import ModelRunner, RuntimeConfig

T, B, I, H = 4, 3, 5, 6


def recurrent_model(op, direction, layout, attrs=None, with_states=True, outputs=("Y", "Y_h", "Y_c"),
                    sequence_lens=None, seed=0):
    rng = np.random.default_rng(seed)
    d = 2 if direction == "bidirectional" else 1
    gates = 4 if op == "LSTM" else 3
    state = [B, d, H] if layout else [d, B, H]

    def tensor(name, shape, scale=0.5):
        return helper.make_tensor(name, TensorProto.FLOAT, shape, (rng.standard_normal(int(np.prod(shape))) * scale))

    inits = [tensor("W", [d, gates * H, I]), tensor("R", [d, gates * H, H]), tensor("B", [d, 2 * gates * H])]
    names = ["X", "W", "R", "B", "", ""]
    if sequence_lens is not None:
        inits.append(helper.make_tensor("lens", TensorProto.INT32, [B], sequence_lens))
        names[4] = "lens"
    if with_states:
        inits.append(tensor("h0", state, 1.0))
        names[5] = "h0"
        if op == "LSTM":
            inits += [tensor("c0", state, 1.0), tensor("P", [d, 3 * H])]
            names += ["c0", "P"]
    outs = list(outputs if op == "LSTM" else [o for o in outputs if o != "Y_c"])
    node = helper.make_node(op, names, outs, direction=direction, hidden_size=H, layout=layout, **(attrs or {}))
    x_shape = [B, T, I] if layout else [T, B, I]
    graph = helper.make_graph([node], "rnn", [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape)],
                              [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs if o], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    x = rng.standard_normal(x_shape).astype(np.float32)
    return model, x


def expected(model, x, layout):
    if layout == 0:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        return sess.run(None, {"X": x})
    return reference_run(model, {"X": x})


def emulator(model, x, precision="fp32"):
    converted = Converter(precision=precision).convert(model)
    runner = ModelRunner(Compiler.compile(converted), RuntimeConfig())
    feed = x.astype(np.float16) if precision == "fp16" else x
    result = runner.execute({"X": feed})
    return [result[o.name].astype(np.float32) for o in model.graph.output]


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("layout", [0, 1])
def test_directions_and_layouts(op, direction, layout):
    model, x = recurrent_model(op, direction, layout)
    for got, want in zip(emulator(model, x), expected(model, x, layout)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op,attrs", [
    ("GRU", {"linear_before_reset": 1}),
    ("LSTM", {"clip": 0.7}),
    ("LSTM", {"input_forget": 1}),
    ("GRU", {"activations": ["HardSigmoid", "LeakyRelu", "Sigmoid", "Tanh"], "activation_alpha": [0.3, 0.1],
             "activation_beta": [0.4]}),
    ("LSTM", {"activations": ["Sigmoid", "Tanh", "Softsign"]}),
])
def test_attributes(op, attrs):
    direction = "bidirectional" if len(attrs.get("activations", [])) == 4 else "forward"
    model, x = recurrent_model(op, direction, 0, attrs)
    for got, want in zip(emulator(model, x), expected(model, x, 0)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_no_initial_states_only_last_state_output_and_full_sequence_lens(op):
    model, x = recurrent_model(op, "forward", 0, with_states=False, outputs=("", "Y_h"), sequence_lens=[T] * B)
    got, = emulator(model, x)
    want, = expected(model, x, 0)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_float16(op):
    model, x = recurrent_model(op, "bidirectional", 0)
    for got, want in zip(emulator(model, x, "fp16"), expected(model, x, 0)):
        np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)


def test_partial_sequence_lens_is_refused_naming_the_node():
    model, x = recurrent_model("LSTM", "forward", 0, sequence_lens=[T, 2, T])
    with pytest.raises(LoweringError, match=r"LSTM.*sequence_lens \[4, 2, 4\] differs from the sequence length 4"):
        Compiler.compile(model)
