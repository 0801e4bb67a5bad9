import onnx

from compiler.converter.pass_registry import register
from compiler.converter.passes.shape_inference import check_static_shapes
from compiler.errors import ConversionError
from compiler.onnx_graph.tensor_types import infer_types

_PROTOBUF_LIMIT = 2**31 - 1  # onnx.checker takes the model serialized; bigger models cannot be


@register("final_check", kind="check")
def final_check(model, ctx):
    """onnx.checker, all shapes static, and every node lowerable to an emulator kernel."""
    if model.ByteSize() < _PROTOBUF_LIMIT:
        try:
            onnx.checker.check_model(model)
        except Exception as e:  # ValidationError from C++
            raise ConversionError(f"{ctx.model_name}: the converted model is not valid ONNX: {str(e).strip()}") from None
    check_static_shapes(model, infer_types(model, model_name=ctx.model_name).types, ctx.model_name)
    # Lowering each node is the exact test of "lowerable": unsupported op types, dtypes or
    # non-constant shape operands raise the same errors the compile step would.
    from compiler.lowering.lower_graph import lower_graph  # the lowering imports the converter's helpers
    # (Kernel fusion is the compile step's; fused nodes lower from the nodes checked here.)
    lower_graph(model, _DiscardingWeightStore(), ctx.model_name, kernel_fusion=False)
    return model


class _DiscardingWeightStore:
    """Lowering needs a weight store; the check has no use for the bytes, so none are hashed."""

    class _Entry:
        key = "unused"

    def add(self, name, array):
        return self._Entry()
