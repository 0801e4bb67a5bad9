from compiler.converter.pass_registry import register
from compiler.errors import ConversionError
from compiler.onnx_graph.graph_edit import runtime_inputs


@register("const_batch_size", kind="shape")
def const_batch_size(model, ctx):
    """Fix dim batch_axis of every graph input to --batch_size."""
    if ctx.batch_size is None:
        return model
    axis = ctx.batch_axis
    for inp in runtime_inputs(model.graph):
        tt = inp.type.tensor_type
        if not inp.type.HasField("tensor_type") or not tt.HasField("shape"):
            raise ConversionError(f"{ctx.model_name}: input '{inp.name}' has no shape, so --batch_size cannot "
                                  f"set its batch dim; give its full shape with --input_shape {inp.name}=d0,d1,...")
        if len(tt.shape.dim) <= axis:
            ctx.logger.info("input %s has rank %d <= batch_axis %d: batch size not applied",
                            inp.name, len(tt.shape.dim), axis)
            continue
        explicit = ctx.input_shape.get(inp.name)
        if explicit is not None and explicit[axis] != ctx.batch_size:
            raise ConversionError(f"{ctx.model_name}: --input_shape gives input '{inp.name}' dim {axis} = "
                                  f"{explicit[axis]} but --batch_size is {ctx.batch_size} (batch_axis {axis})")
        dim = tt.shape.dim[axis]
        dim.Clear()
        dim.dim_value = ctx.batch_size
    return model
