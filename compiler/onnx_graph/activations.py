"""The one table of the activation functions and elementwise math the compiler fuses: which
activations the fused ops' epilogue has (with their `activation_params`, as the runtime's
epilogue reads them), which ONNX op each comes from, the numpy form of the elementwise ops (to
recognize activation chains by evaluating them) and the opcodes of the FusedElementwise program
(the runtime's elementwise_program.h). The kernel fusion passes, the internal op schemas and the
lowering rules read it from here."""
import dataclasses
import math
from typing import Callable, Dict, Mapping, Optional, Tuple

import numpy as np

_erf = np.vectorize(math.erf)


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


@dataclasses.dataclass(frozen=True)
class EpilogueActivation:
    params: Tuple[str, ...] = ()                  # activation_params, in order
    onnx_op: Optional[str] = None                 # the ONNX op it fuses from directly (attributes = params)
    onnx_defaults: Mapping[str, float] = dataclasses.field(default_factory=dict)  # ONNX's attribute defaults
    chain: Optional[Callable] = None              # numpy form, when an elementwise chain may compute it
    chain_params: Tuple[float, ...] = ()          # the params of that chain form


# Activation name (the fused ops' `activation` attribute; "" none) -> its description. Clip and
# Gelu come from ONNX ops whose operands or attributes need reading (fuse_epilogue does that).
ACTIVATIONS: Dict[str, EpilogueActivation] = {
    "": EpilogueActivation(),
    "Relu": EpilogueActivation(onnx_op="Relu"),
    "Clip": EpilogueActivation(("min", "max")),
    "LeakyRelu": EpilogueActivation(("alpha",), "LeakyRelu", {"alpha": 0.01}),
    "Sigmoid": EpilogueActivation(onnx_op="Sigmoid", chain=_sigmoid),
    "Swish": EpilogueActivation(("alpha",), chain=lambda v: v * _sigmoid(v), chain_params=(1.0,)),
    "HardSigmoid": EpilogueActivation(("alpha", "beta"), "HardSigmoid", {"alpha": 0.2, "beta": 0.5}),
    "HardSwish": EpilogueActivation(onnx_op="HardSwish", chain=lambda v: v * np.clip(v / 6.0 + 0.5, 0.0, 1.0)),
    "GeluErf": EpilogueActivation(chain=lambda v: 0.5 * v * (1.0 + _erf(v / math.sqrt(2.0)))),
    "GeluTanh": EpilogueActivation(
        chain=lambda v: 0.5 * v * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (v + 0.044715 * v ** 3)))),
    "Tanh": EpilogueActivation(onnx_op="Tanh", chain=np.tanh),
}


@dataclasses.dataclass(frozen=True)
class ElementwiseOp:
    program_op: Optional[str]         # FusedElementwise opcode; None: the program lacks it
    numpy: Optional[Callable] = None  # float64 form, for the ops an activation chain may contain
    arity: int = 1


# ONNX elementwise op (default domain) -> how the fusions see it.
ELEMENTWISE_OPS: Dict[str, ElementwiseOp] = {
    # Keras' exact Gelu exports as x·0.5·erfc(−x/√2) with erfc(z) = 1 − erf(z): Neg(x) first.
    "Neg": ElementwiseOp("neg", np.negative),
    "Abs": ElementwiseOp("abs"),
    "Relu": ElementwiseOp("relu"),
    "Sqrt": ElementwiseOp("sqrt", np.sqrt),
    "Reciprocal": ElementwiseOp("reciprocal", np.reciprocal),
    "Exp": ElementwiseOp("exp"),
    "Log": ElementwiseOp("log"),
    "Tanh": ElementwiseOp("tanh", np.tanh),
    "Sigmoid": ElementwiseOp("sigmoid", _sigmoid),
    "Erf": ElementwiseOp("erf", _erf),
    "Add": ElementwiseOp("add", np.add, 2),
    "Sub": ElementwiseOp("sub", np.subtract, 2),
    "Mul": ElementwiseOp("mul", np.multiply, 2),
    "Div": ElementwiseOp("div", np.divide, 2),
    "Pow": ElementwiseOp("pow", np.power, 2),
}
