from onnx import helper

from compiler.converter.pass_registry import register
from compiler.onnx_graph.graph_edit import bypass_node
from compiler.onnx_graph.type_inference import infer_types


def transpose_perm(node, rank=None):
    """The node's perm, or ONNX's default (reversed axes) when absent and the rank is known."""
    for attr in node.attribute:
        if attr.name == "perm":
            return list(helper.get_attribute_value(attr))
    return None if rank is None else list(reversed(range(rank)))


@register("eliminate_nop_transpose", kind="eliminate")
def eliminate_nop_transpose(model, ctx):
    """Remove Transposes whose permutation is the identity."""
    transposes = [n for n in model.graph.node if n.op_type == "Transpose" and n.domain in ("", "ai.onnx")]
    if not transposes:
        return model
    types = None
    for node in transposes:
        perm = transpose_perm(node)
        if perm is None:  # default perm reverses the axes: a no-op only for rank <= 1
            types = types or infer_types(model, model_name=ctx.model_name)
            t = types.get(node.input[0])
            perm = transpose_perm(node, len(t.shape)) if t is not None and t.shape is not None else None
        if perm is not None and perm == list(range(len(perm))):
            bypass_node(model.graph, node)
    return model
