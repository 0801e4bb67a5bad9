"""Reading the user's model: a file path, serialized bytes or a ModelProto (copied, so the
caller's object is never modified by the passes). A TensorFlow SavedModel folder or `.keras`
file path is exported to ONNX first (tf_export, TensorFlow imported only then)."""
import os
from typing import Optional, Tuple, Union

import onnx
from onnx import TensorProto

from compiler.errors import ModelLoadError
from compiler.frontends.node_schema_checks import check_node_schemas
from compiler.frontends.tensor_data_checks import check_tensor_data
from compiler.frontends.tf_export import tensorflow_to_onnx
from compiler.frontends.tf_source import is_tensorflow_model

ModelSource = Union[str, os.PathLike, bytes, bytearray, onnx.ModelProto]


def load_model(source: ModelSource, model_name: str = None, signature_name: Optional[str] = None,
               tf_opset: Optional[int] = None) -> Tuple[onnx.ModelProto, str]:
    """Returns (a private ModelProto, a name for messages). signature_name and tf_opset apply to
    TensorFlow models only: the SavedModel signature to export (default serving_default) and the
    ONNX opset tf2onnx writes (default 17)."""
    if is_tensorflow_model(source):
        path = os.fspath(source)
        model, name = tensorflow_to_onnx(path, signature_name, tf_opset), model_name or path
    elif isinstance(source, onnx.ModelProto):
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
                                 else f"{path}: not a file (a folder is accepted only when it is a TensorFlow "
                                      f"SavedModel, with a saved_model.pb)")
        try:
            model = onnx.load(path)  # also loads external data stored beside the model
        except Exception as e:
            raise ModelLoadError(f"{path}: not a valid ONNX model ({str(e).strip()})") from None
    else:
        raise ModelLoadError(f"expected an ONNX ModelProto, serialized model bytes, an ONNX file path, a "
                             f"TensorFlow SavedModel folder or a .keras file, "
                             f"got {type(source).__name__}")
    if not model.HasField("graph") or (not model.graph.node and not model.graph.output):
        raise ModelLoadError(f"{name}: not a valid ONNX model (no graph, or a graph without nodes and outputs)")
    for init in model.graph.initializer:
        if init.data_location == TensorProto.EXTERNAL:
            raise ModelLoadError(f"{name}: initializer '{init.name}' keeps its data in an external file, "
                                 f"which was not loaded; pass the model's file path so its folder is searched")
    check_tensor_data(model, name)
    check_node_schemas(model, name)
    return model, name
