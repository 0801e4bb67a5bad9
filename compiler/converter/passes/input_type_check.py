from compiler.converter.pass_registry import register
from compiler.errors import ConversionError
from compiler.onnx_graph.graph_edit import runtime_inputs
from compiler.onnx_graph.tensor_types import DTYPE_NAMES, elem_type_name, type_of_value_info


@register("input_type_check", kind="check")
def input_type_check(model, ctx):
    """Refuse a graph input whose element type the emulator lacks (complex, string, float8...)."""
    # Runs before input_size_check, which can only size the types it knows, and before onnx's
    # shape inference, which allocates from the declared shapes of inputs of any type.
    for inp in runtime_inputs(model.graph):
        kind = inp.type.WhichOneof("value")
        if kind not in (None, "tensor_type"):
            what = kind.replace("_", " ")
            raise ConversionError(f"{ctx.model_name}: input '{inp.name}' is {'an' if what[0] in 'aeiou' else 'a'} "
                                  f"{what}; the emulator takes tensors only")
        t = type_of_value_info(inp)
        if t is not None and t.elem_type not in DTYPE_NAMES:
            raise ConversionError(
                f"{ctx.model_name}: input '{inp.name}' has element type {elem_type_name(t.elem_type)}, which the "
                f"emulator does not support ({', '.join(DTYPE_NAMES.values())})")
    return model
