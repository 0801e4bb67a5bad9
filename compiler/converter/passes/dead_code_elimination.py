from compiler.converter.pass_registry import register
from compiler.onnx_graph.graph_edit import node_uses, producers, remove_nodes, remove_value_info


@register("dead_code_elimination", kind="eliminate")
def dead_code_elimination(model, ctx):
    """Remove nodes whose outputs do not reach a graph output."""
    graph = model.graph
    made = producers(graph)
    live, pending = set(), [o.name for o in graph.output]
    seen = set(pending)
    while pending:
        node = made.get(pending.pop())
        if node is None or id(node) in live:
            continue
        live.add(id(node))
        for name in node_uses(node):
            if name not in seen:
                seen.add(name)
                pending.append(name)
    dead = [n for n in graph.node if id(n) not in live]
    if dead:
        ctx.logger.info("dead_code_elimination: removing %d node(s)", len(dead))
        remove_value_info(graph, [out for n in dead for out in n.output])
        remove_nodes(graph, dead)
    return model
