"""Reading the user's model: a file path, serialized bytes or a ModelProto (copied, so the
caller's object is never modified by the passes)."""
import os
from typing import Tuple, Union

import onnx
from onnx import TensorProto

from compiler.errors import ModelLoadError

ModelSource = Union[str, os.PathLike, bytes, bytearray, onnx.ModelProto]


def load_model(source: ModelSource, model_name: str = None) -> Tuple[onnx.ModelProto, str]:
    """Returns (a private ModelProto, a name for messages)."""
    if isinstance(source, onnx.ModelProto):
        model = onnx.ModelProto()
        model.CopyFrom(source)
        name = model_name or (model.graph.name and f"<model '{model.graph.name}'>") or "<model>"
    elif isinstance(source, (bytes, bytearray, memoryview)):
        name = model_name or "<model bytes>"
        model = onnx.ModelProto()
        try:
            model.ParseFromString(bytes(source))
        except Exception as e:
            raise ModelLoadError(f"{name}: not a valid ONNX model ({e})") from None
    elif isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        name = model_name or path
        if not os.path.isfile(path):
            raise ModelLoadError(f"{path}: file not found" if not os.path.exists(path)
                                 else f"{path}: not a file")
        try:
            model = onnx.load(path)  # also loads external data stored beside the model
        except Exception as e:
            raise ModelLoadError(f"{path}: not a valid ONNX model ({str(e).strip()})") from None
    else:
        raise ModelLoadError(f"expected an ONNX ModelProto, serialized model bytes or a file path, "
                             f"got {type(source).__name__}")
    if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise ModelLoadError(f"{name}: not a valid ONNX model (no graph, or a graph without nodes and outputs)")
    for init in model.graph.initializer:
        if init.data_location == TensorProto.EXTERNAL:
            raise ModelLoadError(f"{name}: initializer '{init.name}' keeps its data in an external file, "
                                 f"which was not loaded; pass the model's file path so its folder is searched")
    return model, name
