"""Zero Pad of the spatial axes in front of a Conv (or AveragePool counting the padding) folded
into that op's own pads.

Keras' ZeroPadding2D in front of a stride-2 convolution (MobileNetV2's blocks, ResNet's stem)
exports as Pad → Conv with pads 0: an extra copy of the activation. Padding with zeros is what
the Conv's `pads` do, so the Pad's begin/end amounts are added to them and the Pad goes away.
Folded only when the result is exactly the same:

  Pad    mode "constant", fill value 0 (or absent); pads constant (input since opset 11, with
         optional axes since 18; attribute before), non-negative, zero on axes 0 and 1 (N, C);
         its output has this one reader and is not a graph output.
  Conv   reads the Pad as its data input (any group: depthwise too), auto_pad NOTSET or VALID.
  AveragePool  the same, with count_include_pad=1 (padding counts in the divisor as the
         explicit zeros did) and ceil_mode=0 (a partial last window could otherwise reach past
         the padding, where the two forms count differently).

MaxPool is never folded: it pads with −∞, so a zero Pad changes its result wherever the
input can be negative."""
from typing import List, Optional

import numpy as np
import onnx
from onnx import helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph.constants import Constants
from compiler.onnx_graph.graph_edit import consumers, opset_version, remove_nodes, remove_value_info
from compiler.onnx_graph.type_inference import infer_types

_DEFAULT_DOMAINS = ("", "ai.onnx")
_WINDOW_OPS = ("Conv", "AveragePool")
_INT64_LIMIT = 2 ** 63


@register("fold_pad_into_conv", kind="fuse")
def fold_pad_into_conv(model, ctx):
    """Fold a zero Pad of the spatial axes into the pads of the Conv/AveragePool(count_include_pad) reading it."""
    graph = model.graph
    pads_nodes = [n for n in graph.node if n.op_type == "Pad" and n.domain in _DEFAULT_DOMAINS]
    if not pads_nodes:
        return model
    opset = opset_version(model)
    constants = Constants(graph, opset, ctx.model_name)
    outputs = {o.name for o in graph.output}
    readers = consumers(graph)
    types = None  # inferred on first need (Pad with axes)
    for pad in pads_nodes:
        r = readers.get(pad.output[0], [])
        if len(r) != 1 or pad.output[0] in outputs:
            continue
        window = r[0]
        if window.op_type not in _WINDOW_OPS or window.domain not in _DEFAULT_DOMAINS or not _takes_pads(window, pad):
            continue
        if opset >= 18 and len(pad.input) > 3 and pad.input[3] and types is None:
            types = infer_types(model, model_name=ctx.model_name).types
        amounts = _zero_pad_amounts(pad, opset, constants, types)
        if amounts is None:
            continue
        rank = len(amounts) // 2
        if rank < 3:
            continue
        begins, ends = amounts[:rank], amounts[rank:]
        if any(begins[:2]) or any(ends[:2]):
            continue  # batch or channel padding changes the window op's input, not its border
        spatial = rank - 2
        old = _window_pads(window, spatial)
        if old is None:
            continue
        new = ([old[i] + begins[2 + i] for i in range(spatial)]
               + [old[spatial + i] + ends[2 + i] for i in range(spatial)])
        if max(new) >= _INT64_LIMIT:
            continue  # the sum does not fit the attribute; the Pad stays and meets the size checks
        _set_pads(window, new)
        window.input[0] = pad.input[0]
        remove_value_info(graph, [pad.output[0]])
        remove_nodes(graph, [pad])
        ctx.logger.debug("fold_pad_into_conv: %s '%s' folded into %s '%s' (pads %s)", pad.op_type, pad.name,
                         window.op_type, window.name, new)
    return model


def _takes_pads(window: onnx.NodeProto, pad: onnx.NodeProto) -> bool:
    """window reads the Pad only as its data input and its own padding is zero padding."""
    if window.input[0] != pad.output[0] or pad.output[0] in list(window.input)[1:]:
        return False
    attrs = {a.name: helper.get_attribute_value(a) for a in window.attribute}
    if _text(attrs.get("auto_pad", b"NOTSET")) not in ("NOTSET", "VALID"):
        return False
    if window.op_type == "AveragePool":
        return int(attrs.get("count_include_pad", 0)) == 1 and int(attrs.get("ceil_mode", 0)) == 0
    return True


def _zero_pad_amounts(pad: onnx.NodeProto, opset: int, constants: Constants, types) -> Optional[List[int]]:
    """Begins then ends for every axis of a constant-mode zero Pad, or None when the Pad is
    anything else (other mode or fill value, operands computed at run time, negative pads)."""
    attrs = {a.name: helper.get_attribute_value(a) for a in pad.attribute}
    if _text(attrs.get("mode", b"constant")) != "constant":
        return None
    if opset < 11:
        pads, value, axes = [int(p) for p in attrs.get("pads", [])], float(attrs.get("value", 0.0)), None
    else:
        operands = list(pad.input) + [""] * (4 - len(pad.input))
        if any(name and name not in constants for name in operands[1:]):
            return None
        pads = [int(p) for p in constants.value(operands[1]).reshape(-1)] if operands[1] else []
        value = constants.value(operands[2]).reshape(-1) if operands[2] else np.zeros(1)
        if value.size != 1:
            return None
        value = float(value[0])
        axes = [int(a) for a in constants.value(operands[3]).reshape(-1)] if operands[3] else None
    if value != 0.0 or not pads or len(pads) % 2 or min(pads) < 0:
        return None
    if axes is None:
        return pads
    t = types.get(pad.input[0]) if types is not None else None
    if t is None or t.shape is None or len(pads) != 2 * len(axes):
        return None
    rank = len(t.shape)
    full = [0] * (2 * rank)
    for i, a in enumerate(axes):
        if not -rank <= a < rank:
            return None
        a %= rank
        full[a], full[rank + a] = pads[i], pads[len(axes) + i]
    return full


def _window_pads(window: onnx.NodeProto, spatial: int) -> Optional[List[int]]:
    attrs = {a.name: helper.get_attribute_value(a) for a in window.attribute}
    if _text(attrs.get("auto_pad", b"NOTSET")) == "VALID":
        return [0] * (2 * spatial)
    pads = [int(p) for p in attrs.get("pads", [0] * (2 * spatial))]
    return pads if len(pads) == 2 * spatial else None


def _set_pads(window: onnx.NodeProto, pads: List[int]) -> None:
    kept = [a for a in window.attribute if a.name not in ("pads", "auto_pad")]
    del window.attribute[:]
    window.attribute.extend(kept + [helper.make_attribute("pads", pads)])


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
