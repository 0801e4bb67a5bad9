from compiler.converter.pass_registry import register
from compiler.errors import ConversionError
from compiler.onnx_graph.graph_edit import runtime_inputs
from compiler.onnx_graph.tensor_types import write_type
from compiler.onnx_graph.type_inference import infer_types
from compiler.onnx_graph.topo_order import node_label


@register("shape_inference", kind="shape")
def shape_inference(model, ctx):
    """Strict ONNX shape inference (with data propagation); every runtime tensor must be static."""
    inferred = infer_types(model, strict=True, model_name=ctx.model_name)
    graph = model.graph
    anchors = {i.name for i in graph.input} | {o.name for o in graph.output}
    del graph.value_info[:]
    graph.value_info.extend(vi for vi in inferred.value_info if vi.name not in anchors)
    for out in graph.output:  # from the types table: it also covers outputs that are constants
        t = inferred.types.get(out.name)
        if t is not None and t.shape is not None:
            write_type(out, t)
    check_static_shapes(model, inferred.types, ctx.model_name)
    return model


def check_static_shapes(model, types, model_name: str) -> None:
    """Raises ConversionError naming the first runtime tensor (graph input or node output)
    whose shape is not fully static, and the node producing it."""
    graph = model.graph
    for inp in runtime_inputs(graph):
        t = types.get(inp.name)
        if t is None or not t.is_static:
            shape = "no shape" if t is None else f"shape {t.shape_text()}"
            raise ConversionError(f"{model_name}: graph input '{inp.name}' has {shape}, which is not static; "
                                  f"set it with --input_shape {inp.name}=d0,d1,... or --batch_size")
    for idx, node in enumerate(graph.node):
        for out in node.output:
            if not out:
                continue
            t = types.get(out)
            if t is None or not t.is_static:
                shape = ("no inferred shape" if t is None else "an unknown shape" if t.shape is None
                         else f"a non-static shape {t.shape_text()}")
                raise ConversionError(f"{model_name}: tensor '{out}' (output of node {node_label(node, idx)}) has "
                                      f"{shape}; all shapes must be static: fix the input shapes with "
                                      f"--input_shape/--batch_size")
