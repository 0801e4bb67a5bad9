from compiler.converter.pass_registry import register
from compiler.onnx_graph.graph_edit import bypass_node


@register("eliminate_identity", kind="eliminate")
def eliminate_identity(model, ctx):
    """Remove Identity nodes, rewiring their readers to the Identity's input."""
    for node in [n for n in model.graph.node if n.op_type == "Identity" and n.domain in ("", "ai.onnx")]:
        bypass_node(model.graph, node)
    return model
