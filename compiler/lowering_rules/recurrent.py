"""ONNX LSTM and GRU -> the emulator's LSTM / GRU kernels (tf_popef_op/.../kernels/lstm.cc,
gru.cc). Every attribute is made explicit here: defaults filled, activation alpha/beta resolved
per function, and flags saying which optional inputs and outputs the step carries (absent ones
are left out of the step's lists). sequence_lens is accepted only when it is a constant that
covers every sequence fully (what tf2onnx writes for Keras layers without masking); it is then
dropped."""
from typing import List, Tuple

import numpy as np

from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule

FLOATS = ("float32", "float16")
DIRECTIONS = {"forward": 1, "reverse": 1, "bidirectional": 2}
# ONNX's activation functions with the defaults of the (alpha, beta) they take; None = not taken.
_ACTIVATION_PARAMS = {
    "Sigmoid": (None, None), "Tanh": (None, None), "Relu": (None, None), "Softsign": (None, None),
    "Softplus": (None, None), "HardSigmoid": (0.2, 0.5), "LeakyRelu": (0.01, None),
    "ThresholdedRelu": (1.0, None), "ScaledTanh": (1.0, 1.0), "Affine": (1.0, 0.0), "Elu": (1.0, None),
}


def _activations(ctx: NodeContext, defaults: List[str], directions: int) -> Tuple[str, List[float], List[float]]:
    names = [a.decode() if isinstance(a, bytes) else a for a in (ctx.attr("activations") or [])]
    if not names:
        names = defaults * directions
    elif len(names) == len(defaults) and directions == 2:
        names = names * 2  # one set given for both directions
    if len(names) != len(defaults) * directions:
        raise ctx.error(f"expected {len(defaults) * directions} activations for {directions} direction(s), "
                        f"got {names}")
    canonical = {k.lower(): k for k in _ACTIVATION_PARAMS}
    alphas = list(ctx.attr("activation_alpha") or [])
    betas = list(ctx.attr("activation_beta") or [])
    out_names, out_alpha, out_beta = [], [], []
    for name in names:
        known = canonical.get(name.lower())
        if known is None:
            raise ctx.error(f"activation '{name}' is not supported; supported: {', '.join(_ACTIVATION_PARAMS)}")
        alpha_default, beta_default = _ACTIVATION_PARAMS[known]
        # ONNX: the alpha/beta lists are consumed in order by the functions that take them.
        alpha = alphas.pop(0) if alpha_default is not None and alphas else alpha_default
        beta = betas.pop(0) if beta_default is not None and betas else beta_default
        out_names.append(known)
        out_alpha.append(float(alpha or 0.0))
        out_beta.append(float(beta or 0.0))
    return ",".join(out_names), out_alpha, out_beta


def _check_sequence_lens(ctx: NodeContext, index: int) -> None:
    if not ctx.has_input(index):
        return
    x = ctx.input_type(0).shape
    seq = x[1] if int(ctx.attr("layout", 0)) == 1 else x[0]
    if ctx.node.input[index] not in ctx.constants:
        raise ctx.error(f"sequence_lens '{ctx.node.input[index]}' is computed at run time; the emulator's "
                        f"{ctx.node.op_type} runs every sequence to its full length {seq} only")
    lens = np.asarray(ctx.constant_input(index))
    if lens.size and not np.all(lens == seq):
        raise ctx.error(f"sequence_lens {lens.tolist()} differs from the sequence length {seq}; the emulator's "
                        f"{ctx.node.op_type} runs every sequence to its full length only")


def _lower_recurrent(ctx: NodeContext, op: str, gates: int, default_activations: List[str], optional_inputs: List[Tuple[int, str]],
                     outputs: List[str], extra_attrs: dict) -> KernelCall:
    node = ctx.node
    direction = ctx.attr("direction", b"forward")
    direction = direction.decode() if isinstance(direction, bytes) else direction
    if direction not in DIRECTIONS:
        raise ctx.error(f"direction must be one of {', '.join(DIRECTIONS)}, got '{direction}'")
    hidden = ctx.attr("hidden_size")
    if hidden is None:
        w = ctx.input_type(1).shape  # [directions, gates * hidden, input]
        hidden = w[1] // gates
    ctx.require_dtypes(FLOATS, [i for i in range(len(node.input)) if i != 4])
    _check_sequence_lens(ctx, 4)
    names, alphas, betas = _activations(ctx, default_activations, DIRECTIONS[direction])
    inputs = list(node.input[:3])
    attrs = {"direction": direction, "hidden_size": int(hidden), "layout": int(ctx.attr("layout", 0)),
             "clip": float(ctx.attr("clip", 0.0) or 0.0), "activations": names,
             "activation_alpha": alphas, "activation_beta": betas, **extra_attrs}
    for index, flag in optional_inputs:
        attrs[flag] = int(ctx.has_input(index))
        if ctx.has_input(index):
            inputs.append(node.input[index])
    for i, flag in enumerate(outputs):
        attrs[flag] = int(i < len(node.output) and node.output[i] != "")
    return KernelCall(op, inputs, attrs)


@lowering_rule("LSTM")
def lower_lstm(ctx: NodeContext) -> KernelCall:
    """X, W, R[, B, sequence_lens, initial_h, initial_c, P] -> [Y, Y_h, Y_c]."""
    ctx.require_inputs(3, 8)
    return _lower_recurrent(ctx, "LSTM", 4, ["Sigmoid", "Tanh", "Tanh"],
                            [(3, "has_bias"), (5, "has_initial_h"), (6, "has_initial_c"), (7, "has_peephole")],
                            ["output_y", "output_y_h", "output_y_c"],
                            {"input_forget": int(ctx.attr("input_forget", 0))})


@lowering_rule("GRU")
def lower_gru(ctx: NodeContext) -> KernelCall:
    """X, W, R[, B, sequence_lens, initial_h] -> [Y, Y_h]."""
    ctx.require_inputs(3, 6)
    return _lower_recurrent(ctx, "GRU", 3, ["Sigmoid", "Tanh"], [(3, "has_bias"), (5, "has_initial_h")],
                            ["output_y", "output_y_h"],
                            {"linear_before_reset": int(ctx.attr("linear_before_reset", 0))})
