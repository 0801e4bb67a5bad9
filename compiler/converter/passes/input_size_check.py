import math

import numpy as np
from onnx import helper

from compiler.converter.pass_registry import register
from compiler.errors import DeviceMemoryError
from compiler.onnx_graph.graph_edit import runtime_inputs
from compiler.onnx_graph.tensor_types import DTYPE_NAMES, type_of_value_info


@register("input_size_check", kind="check")
def input_size_check(model, ctx):
    """Refuse a graph input larger than the device memory, once --input_shape/--batch_size have set its shape."""
    # Runs before any pass that infers or folds: later stages may allocate from declared shapes.
    if ctx.max_input_bytes is None:
        return model
    for inp in runtime_inputs(model.graph):
        t = type_of_value_info(inp)
        if t is None or not t.is_static or t.elem_type not in DTYPE_NAMES:
            continue  # the lowering refuses what is not static or not supported
        nbytes = math.prod(t.shape) * np.dtype(helper.tensor_dtype_to_np_dtype(t.elem_type)).itemsize
        if nbytes > ctx.max_input_bytes:
            raise DeviceMemoryError(
                f"{ctx.model_name}: input '{inp.name}' ({t}) needs {nbytes:,} bytes, more than the device memory "
                f"of {ctx.max_input_bytes:,}; reduce the batch size or the input shapes")
    return model
