from compiler.converter.pass_registry import register
from compiler.onnx_graph.graph_edit import node_uses, runtime_inputs


@register("eliminate_unused_inputs", kind="eliminate")
def eliminate_unused_inputs(model, ctx):
    """Remove graph inputs no node (or subgraph) reads and no graph output names (opt-in, not in the default pipeline)."""
    # Opt-in (pipeline.OPT_IN_PASSES): a declared input is part of the model's interface, which
    # onnxruntime keeps and clients feed (ONNX's own backend tests feed CastLike's `like`, which
    # its expanded form never reads), and a feed for an anchor the executable lacks is an error.
    # Run it for a model whose exporter listed inputs it never meant (then the executable asks no
    # caller for data it throws away).
    graph = model.graph
    read = {o.name for o in graph.output}
    for node in graph.node:
        read.update(node_uses(node))
    unused = [i for i in runtime_inputs(graph) if i.name not in read]
    for inp in unused:
        ctx.logger.info("eliminate_unused_inputs: dropping graph input '%s': no node reads it", inp.name)
        graph.input.remove(inp)
    return model
