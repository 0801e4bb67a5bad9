import onnx

from compiler.converter.pass_registry import register
from compiler.converter.passes.shape_inference import check_static_shapes
from compiler.errors import ConversionError
from compiler.lowering_rules import check_lowerable
from compiler.onnx_graph.type_inference import infer_types

_PROTOBUF_LIMIT = 2**31 - 1  # onnx.checker takes the model serialized; bigger models cannot be


@register("final_check", kind="check")
def final_check(model, ctx):
    """onnx.checker, all shapes static, and every node lowerable to an emulator kernel."""
    if model.ByteSize() < _PROTOBUF_LIMIT:
        try:
            onnx.checker.check_model(model)
        except Exception as e:  # ValidationError from C++
            raise ConversionError(f"{ctx.model_name}: the converted model is not valid ONNX: {str(e).strip()}") from None
    types = infer_types(model, model_name=ctx.model_name).types
    check_static_shapes(model, types, ctx.model_name)
    check_lowerable(model, types, ctx.model_name)  # kernel fusion writes its nodes from the ones checked here
    return model
