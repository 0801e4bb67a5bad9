from compiler.converter.pass_registry import register
from compiler.errors import ConversionError
from compiler.onnx_graph.graph_edit import runtime_inputs
from compiler.onnx_graph.tensor_types import set_shape


@register("input_shape_override", kind="shape")
def input_shape_override(model, ctx):
    """Set graph input shapes given by --input_shape NAME=d0,d1,..."""
    if not ctx.input_shape:
        return model
    inputs = {i.name: i for i in runtime_inputs(model.graph)}
    for name, dims in ctx.input_shape.items():
        if name not in inputs:
            raise ConversionError(f"{ctx.model_name}: --input_shape names '{name}', which is not an input of the "
                                  f"model; its inputs are: {', '.join(inputs) or '(none)'}")
        if not inputs[name].type.HasField("tensor_type"):
            raise ConversionError(f"{ctx.model_name}: input '{name}' is not a tensor; --input_shape cannot set it")
        set_shape(inputs[name].type.tensor_type, dims)
    return model
