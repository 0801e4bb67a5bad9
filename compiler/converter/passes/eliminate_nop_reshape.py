from compiler.converter.pass_registry import register
from compiler.onnx_graph.graph_edit import bypass_node
from compiler.onnx_graph.type_inference import infer_types


@register("eliminate_nop_reshape", kind="eliminate")
def eliminate_nop_reshape(model, ctx):
    """Remove Reshapes whose output shape equals their (static) input shape."""
    reshapes = [n for n in model.graph.node if n.op_type == "Reshape" and n.domain in ("", "ai.onnx")]
    if not reshapes:
        return model
    types = infer_types(model, model_name=ctx.model_name)
    for node in reshapes:
        src, dst = types.get(node.input[0]), types.get(node.output[0])
        if src is not None and dst is not None and src.is_static and dst.is_static and src.shape == dst.shape:
            bypass_node(model.graph, node)
    return model
