"""tf2onnx custom op handlers for TF ops that standard Keras layers produce and tf2onnx 1.17
cannot convert. A handler rewrites one TF node of tf2onnx's graph into ONNX ops in place
(tf2onnx's signature: handler(ctx, node, name, args)).

- Erfc: Keras 3's exact gelu is `0.5 * x * erfc(-x / sqrt(2))`; ONNX has Erf only, so
  erfc(x) = 1 - erf(x).
"""
import numpy as np


def _erfc(ctx, node, name, args):  # erfc(x) -> 1 - Erf(x)
    from tf2onnx import utils
    dtype = utils.map_onnx_to_numpy_type(ctx.get_dtype(node.input[0]))
    erf = ctx.make_node("Erf", [node.input[0]], name=utils.make_name(f"{node.name}_erf"))
    one = ctx.make_const(utils.make_name(f"{node.name}_one"), np.array(1, dtype=dtype))
    node.type = "Sub"
    ctx.replace_inputs(node, [one.output[0], erf.output[0]])


CUSTOM_OP_HANDLERS = {"Erfc": (_erfc, [])}
