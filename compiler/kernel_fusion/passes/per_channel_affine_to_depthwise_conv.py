"""A per-channel affine of an [N, C, H, W] tensor, Mul(x, s) -> Add(·, b) with s and b constants
per channel, -> a 1x1 depthwise Conv(x, W = s, B = b, group = C).

DenseNet applies an unfolded BatchNorm (and a Relu) to every concatenated feature map before
the block's 1x1 convolution: each one a Mul, an Add and a Relu, three passes over the largest
tensors of the network (its Elementwise time, 2-3x OpenVINO's, which folds them into one). As a
depthwise convolution the affine is one kernel, fuse_epilogue adds the Relu as its activation,
and to_nchwc_layout runs it blocked like any depthwise convolution: one pass instead of three.

Only when C is a multiple of the block (8), so the convolution runs blocked, the Mul's output
is read by the Add alone, and both constants broadcast per channel ([1, C, 1, 1], [C, 1, 1] or
one value), not both single values (fuse_elementwise_chain runs those in one loop already).
Runs before fuse_epilogue."""
from typing import Optional

import numpy as np
import onnx
from onnx import helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph import nchwc
from compiler.onnx_graph.graph_edit import consumers, remove_nodes, remove_value_info
from compiler.onnx_graph.graph_rewrite import GraphRewrite
from compiler.onnx_graph.type_inference import infer_types

_DEFAULT_DOMAINS = ("", "ai.onnx")
# The name of the Conv made from the affine whose output is `<base>` (profiles class it by it).
NODE_SUFFIX = "_depthwise_affine"


@register("per_channel_affine_to_depthwise_conv", kind="fuse")
def per_channel_affine_to_depthwise_conv(model, ctx):
    """Mul(x, per-channel s) -> Add(per-channel b) on [N, C, H, W] -> a 1x1 depthwise Conv."""
    graph = model.graph
    if not any(n.op_type == "Mul" for n in graph.node) or not any(n.op_type == "Add" for n in graph.node):
        return model
    _AffineRewrite(model, ctx).run()
    return model


class _AffineRewrite(GraphRewrite):
    def __init__(self, model: onnx.ModelProto, ctx):
        super().__init__(model, ctx.model_name)
        self.ctx = ctx
        self.types = infer_types(model, model_name=ctx.model_name).types

    def run(self) -> None:
        readers = consumers(self.graph)
        for mul in [n for n in self.graph.node if n.op_type == "Mul" and n.domain in _DEFAULT_DOMAINS]:
            found = self._match(mul, readers)
            if found is None:
                continue
            add, x, scale, bias = found
            dtype = helper.tensor_dtype_to_np_dtype(self.types[x].elem_type)
            channels = self.types[x].shape[1]
            base = add.output[0].rsplit(":", 1)[0]
            w = self.add_initializer(f"{base}_depthwise_scale",
                                     np.broadcast_to(scale, (channels,)).reshape(channels, 1, 1, 1).astype(dtype))
            b = self.add_initializer(f"{base}_depthwise_shift", np.broadcast_to(bias, (channels,)).astype(dtype))
            conv = helper.make_node("Conv", [x, w, b], [add.output[0]], name=f"{base}{NODE_SUFFIX}",
                                    group=channels, kernel_shape=[1, 1])
            self.graph.node.insert(list(self.graph.node).index(add), conv)
            remove_value_info(self.graph, [mul.output[0]])
            remove_nodes(self.graph, [mul, add])
            self.ctx.logger.debug("per_channel_affine_to_depthwise_conv: '%s' + '%s' -> '%s'", mul.name, add.name,
                                  conv.name)

    def _match(self, mul, readers):
        """(add, x, scale [C], bias [C]) for Mul(x, s) -> Add(·, b), else None."""
        if len(mul.input) != 2 or mul.output[0] in self.outputs:
            return None
        after = readers.get(mul.output[0], [])
        if len(after) != 1 or after[0].op_type != "Add" or after[0].domain not in _DEFAULT_DOMAINS:
            return None
        add = after[0]
        for x, s in (mul.input, reversed(mul.input)):
            xt = self.types.get(x)
            if x in self.constants or xt is None or not xt.is_static or len(xt.shape) != 4:
                continue
            if not nchwc.can_block(list(xt.shape)):
                continue
            scale = self._per_channel(s, xt.shape[1])
            other = add.input[1] if add.input[0] == mul.output[0] else add.input[0]
            bias = self._per_channel(other, xt.shape[1])
            if scale is None or bias is None or max(scale.size, bias.size) == 1:
                continue  # two scalars: fuse_elementwise_chain's one loop already does it
            if self.types[add.output[0]].shape == xt.shape:
                return add, x, scale, bias
        return None

    def _per_channel(self, name: str, channels: int) -> Optional[np.ndarray]:
        """The constant's values per channel of an [N, C, H, W] tensor ([C] or one value), else None."""
        if name not in self.constants:
            return None
        v = np.asarray(self.constants.value(name))
        if v.ndim > 4 or not np.issubdtype(v.dtype, np.floating):
            return None
        aligned = (1,) * (4 - v.ndim) + v.shape
        if aligned[0] != 1 or aligned[2:] != (1, 1) or aligned[1] not in (1, channels):
            return None
        return v.reshape(-1)
