"""Static tensor types (element type + shape): TensorType, the dtypes the emulator holds and their
reading from / writing to ONNX value infos. onnx_graph/type_inference.py infers them for a model."""
import dataclasses
from typing import Dict, Optional, Tuple, Union

import numpy as np
import onnx
from onnx import TensorProto, helper


Dim = Union[int, str, None]  # int when static; the dim_param name or None when not

# ONNX element types the emulator can hold, with their PopEF names (docs/popef.md §2).
DTYPE_NAMES: Dict[int, str] = {
    TensorProto.FLOAT: "float32", TensorProto.FLOAT16: "float16", TensorProto.DOUBLE: "float64",
    TensorProto.INT8: "int8", TensorProto.INT16: "int16", TensorProto.INT32: "int32",
    TensorProto.INT64: "int64", TensorProto.UINT8: "uint8", TensorProto.UINT16: "uint16",
    TensorProto.UINT32: "uint32", TensorProto.UINT64: "uint64", TensorProto.BOOL: "bool",
}

def elem_type_name(elem_type: int) -> str:
    """PopEF dtype name, or ONNX's own name for types the emulator does not support."""
    if elem_type in DTYPE_NAMES:
        return DTYPE_NAMES[elem_type]
    try:
        return TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"elem_type {elem_type}"


@dataclasses.dataclass(frozen=True)
class TensorType:
    elem_type: int
    shape: Optional[Tuple[Dim, ...]]  # None when even the rank is unknown

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(isinstance(d, int) and d >= 0 for d in self.shape)

    @property
    def dtype_name(self) -> str:
        return elem_type_name(self.elem_type)

    @property
    def numel(self) -> int:
        assert self.is_static, "numel of a non-static shape"
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        return self.numel * np.dtype(helper.tensor_dtype_to_np_dtype(self.elem_type)).itemsize

    def shape_text(self) -> str:
        if self.shape is None:
            return "unknown rank"
        return "[" + ", ".join("?" if d is None else str(d) for d in self.shape) + "]"

    def __str__(self) -> str:
        return f"{self.dtype_name} {self.shape_text()}"


def type_of_value_info(value_info: onnx.ValueInfoProto) -> Optional[TensorType]:
    if not value_info.type.HasField("tensor_type"):
        return None
    tt = value_info.type.tensor_type
    if not tt.HasField("shape"):
        return TensorType(tt.elem_type, None)
    dims = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        else:
            dims.append(d.dim_param or None)
    return TensorType(tt.elem_type, tuple(dims))


def type_of_initializer(tensor: onnx.TensorProto) -> TensorType:
    return TensorType(tensor.data_type, tuple(int(d) for d in tensor.dims))


def set_shape(tensor_type: onnx.TypeProto.Tensor, dims) -> None:
    tensor_type.ClearField("shape")
    shape = tensor_type.shape
    shape.SetInParent()  # present even when dims is empty: rank 0, not "unknown rank"
    for d in dims:
        shape.dim.add().dim_value = int(d)


def write_type(value_info: onnx.ValueInfoProto, t: TensorType) -> None:
    tensor_type = value_info.type.tensor_type
    tensor_type.elem_type = t.elem_type
    tensor_type.ClearField("shape")
    if t.shape is None:
        return
    shape = tensor_type.shape
    shape.SetInParent()  # a scalar's type has an empty shape, which must still be present
    for d in t.shape:
        dim = shape.dim.add()
        if isinstance(d, int):
            dim.dim_value = d
        elif d:
            dim.dim_param = d
