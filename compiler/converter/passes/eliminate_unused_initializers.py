from compiler.converter.pass_registry import register
from compiler.onnx_graph.graph_edit import node_uses, remove_value_info


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
    unused_set = set(unused)
    kept = [t for t in graph.initializer if t.name not in unused_set]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    kept_inputs = [i for i in graph.input if i.name not in unused_set]  # old models list them as inputs
    del graph.input[:]
    graph.input.extend(kept_inputs)
    remove_value_info(graph, unused_set)
    return model
