"""Attention (compiler/onnx_graph/internal_ops.py; written by fuse_attention): per-head
softmax(scale·Q·Kᵀ)·V on [B, S, H·d] tensors (or the column ranges of one QKV tensor),
float32 or float16. The rule checks the shapes the
kernel assumes, so a malformed node fails here, naming it, rather than in the runtime."""
from compiler.lowering_rules.node_context import KernelCall, NodeContext
from compiler.lowering_rules.registry import lowering_rule
from compiler.onnx_graph.internal_ops import DOMAIN

FLOATS = ("float32", "float16")


@lowering_rule(f"{DOMAIN}::FusedAttention")
def lower_attention(ctx: NodeContext) -> KernelCall:
    """Q [B, Sq, H·d], K [B, Sk, H·d], V [B, Sk, H·dv] -> Y [B, Sq, H·dv]; or, with qkv_widths
    [wq, wk, wv], one QKV [B, S, wq + wk + wv] whose column ranges are Q, K and V."""
    widths = ctx.attr("qkv_widths")
    ctx.require_inputs(1, 1) if widths is not None else ctx.require_inputs(3, 3)
    ctx.require_dtypes(FLOATS)
    heads = int(ctx.attr("num_heads", 0))
    scale = float(ctx.attr("scale", 1.0))
    attrs = {"num_heads": heads, "scale": scale}
    if widths is not None:
        qkv = list(ctx.input_type(0).shape)
        widths = [int(w) for w in widths]
        if len(widths) != 3 or len(qkv) != 3 or min(widths) < 0 or sum(widths) != qkv[2]:
            raise ctx.error(f"QKV {qkv} and qkv_widths {widths} do not make [B, S, wq + wk + wv] with three widths")
        q, k, v = ([qkv[0], qkv[1], w] for w in widths)
        attrs["qkv_widths"] = widths
    else:
        q, k, v = (list(ctx.input_type(i).shape) for i in range(3))
    if heads < 1:
        raise ctx.error(f"num_heads {heads} must be >= 1")
    if not scale > 0:
        raise ctx.error(f"scale {scale} must be > 0")
    if (len(q) != 3 or len(k) != 3 or len(v) != 3 or k[0] != q[0] or v[0] != q[0] or v[1] != k[1] or k[2] != q[2]
            or q[2] % heads or v[2] % heads):
        raise ctx.error(f"Q {q}, K {k}, V {v} do not make [B, Sq, H·d], [B, Sk, H·d], [B, Sk, H·dv] with "
                        f"H = num_heads {heads}")
    if k[1] == 0 or q[2] == 0:
        raise ctx.error(f"no keys (K {k}): the softmax is undefined")
    expected = [q[0], q[1], v[2]]
    if list(ctx.output_type(0).shape) != expected:
        raise ctx.error(f"output '{ctx.node.output[0]}' has shape {ctx.output_type(0).shape_text()}, "
                        f"expected {expected}")
    return KernelCall("FusedAttention", list(ctx.node.input), attrs)
