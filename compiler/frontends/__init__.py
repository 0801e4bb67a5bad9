"""Front ends: reading the user's model (`load_model`: ONNX file, bytes or ModelProto) and
turning models that are not ONNX into ONNX before the converter sees them.

Only TensorFlow for now (a SavedModel folder or a `.keras` file, exported with tf2onnx). This
package never imports TensorFlow at import time: `is_tensorflow_model` looks at the path only,
and TensorFlow is loaded when `tensorflow_to_onnx` is called.
"""
from compiler.frontends.model_loading import ModelSource, load_model
from compiler.frontends.tf_export import DEFAULT_TF_OPSET, tensorflow_to_onnx
from compiler.frontends.tf_source import is_tensorflow_model

__all__ = ["DEFAULT_TF_OPSET", "ModelSource", "is_tensorflow_model", "load_model", "tensorflow_to_onnx"]
