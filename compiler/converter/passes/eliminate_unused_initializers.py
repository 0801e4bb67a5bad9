from compiler.converter.pass_registry import register
from compiler.onnx_graph.graph_edit import node_uses, remove_initializers


@register("eliminate_unused_initializers", kind="eliminate")
def eliminate_unused_initializers(model, ctx):
    """Remove initializers no node reads and no graph output names."""
    graph = model.graph
    used = {o.name for o in graph.output}
    for node in graph.node:
        used.update(node_uses(node))
    unused = [t.name for t in graph.initializer if t.name not in used]
    if not unused:
        return model
    remove_initializers(graph, unused)
    return model
