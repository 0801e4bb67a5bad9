from compiler.converter.pass_registry import register
from compiler.onnx_graph.topo_order import topological_order


@register("sort_graph", kind="order")
def sort_graph(model, ctx):
    """Order nodes topologically (stable: a sorted graph keeps its order)."""
    graph = model.graph
    order = topological_order(graph, ctx.model_name)
    if order != list(range(len(order))):
        sorted_nodes = [graph.node[i] for i in order]
        copies = []
        for node in sorted_nodes:
            copy = type(node)()
            copy.CopyFrom(node)
            copies.append(copy)
        del graph.node[:]
        graph.node.extend(copies)
    return model
