from compiler.converter.pass_registry import register
from compiler.onnx_graph.graph_edit import node_uses, runtime_inputs


@register("eliminate_unused_inputs", kind="eliminate")
def eliminate_unused_inputs(model, ctx):
    """Remove graph inputs no node (or subgraph) reads and no graph output names."""
    # The compiled program never reads them, so the executable would otherwise ask every caller
    # for data it throws away (tf2onnx lists tensors a Keras layer captured, and then folded, as
    # inputs). onnxruntime keeps and requires them: skip this pass to keep such an input declared.
    graph = model.graph
    read = {o.name for o in graph.output}
    for node in graph.node:
        read.update(node_uses(node))
    unused = [i for i in runtime_inputs(graph) if i.name not in read]
    for inp in unused:
        ctx.logger.info("eliminate_unused_inputs: dropping graph input '%s': no node reads it", inp.name)
        graph.input.remove(inp)
    return model
