from compiler.converter.pass_registry import register
from compiler.onnx_graph.graph_edit import bypass_node
from compiler.onnx_graph.type_inference import infer_types


@register("eliminate_nop_cast", kind="eliminate")
def eliminate_nop_cast(model, ctx):
    """Remove Casts whose input already has the target type."""
    casts = [n for n in model.graph.node if n.op_type == "Cast" and n.domain in ("", "ai.onnx")]
    if not casts:
        return model
    types = infer_types(model, model_name=ctx.model_name)
    for node in casts:
        source = types.get(node.input[0])
        target = next((a.i for a in node.attribute if a.name == "to"), None)
        if source is not None and source.elem_type == target:
            bypass_node(model.graph, node)
    return model
