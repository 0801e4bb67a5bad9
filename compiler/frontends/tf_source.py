"""A TensorFlow model on disk -> the concrete function to export and its anchor names.

A SavedModel folder exports one of its signatures (default `serving_default`); a `.keras` file is
wrapped in a function whose inputs are the model's Input layers and whose outputs are named after
the model's output layers (Keras 3 `.keras` files carry no signature of their own). Either way the
ONNX anchor names are the signature's input and output names.
"""
import os
from typing import Optional

from compiler.errors import ModelLoadError

DEFAULT_SIGNATURE = "serving_default"
KERAS_SUFFIX = ".keras"


def is_saved_model_dir(path: str) -> bool:
    return os.path.isdir(path) and (os.path.isfile(os.path.join(path, "saved_model.pb"))
                                    or os.path.isfile(os.path.join(path, "saved_model.pbtxt")))


def is_keras_file(path: str) -> bool:
    return os.path.isfile(path) and path.lower().endswith(KERAS_SUFFIX)


def is_tensorflow_model(source) -> bool:
    """True for a SavedModel folder or a `.keras` file path (decided from the path alone)."""
    if not isinstance(source, (str, os.PathLike)):
        return False
    path = os.fspath(source)
    return is_saved_model_dir(path) or is_keras_file(path)


def import_tensorflow():
    """TensorFlow, imported on first use only (the compiler must stay importable without it)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import tensorflow as tf
    except ImportError as e:
        raise ModelLoadError(f"compiling a TensorFlow model needs TensorFlow, which cannot be imported ({e}); "
                             f"install the pinned requirements (requirements.txt)") from None
    return tf


def saved_model_function(path: str, signature_name: Optional[str] = None):
    """The concrete function of signature `signature_name` of the SavedModel at `path`."""
    tf = import_tensorflow()
    try:
        loaded = tf.saved_model.load(path)
    except Exception as e:
        raise ModelLoadError(f"{path}: cannot load the SavedModel ({str(e).strip().splitlines()[0]})") from None
    signatures = {k: v for k, v in loaded.signatures.items() if not k.startswith("_")}
    if not signatures:
        raise ModelLoadError(f"{path}: the SavedModel has no signatures to export; save it with a serving signature "
                             f"(e.g. keras `model.export(path)` or tf.saved_model.save(..., signatures=...))")
    name = signature_name or (DEFAULT_SIGNATURE if DEFAULT_SIGNATURE in signatures else None)
    if name is None:
        if len(signatures) > 1:
            raise ModelLoadError(f"{path}: the SavedModel has no '{DEFAULT_SIGNATURE}' signature and several others "
                                 f"({', '.join(sorted(signatures))}); choose one with signature_name")
        name = next(iter(signatures))
    if name not in signatures:
        raise ModelLoadError(f"{path}: no signature '{name}'; the SavedModel's signatures are "
                             f"{', '.join(sorted(signatures))}")
    # Keep the loaded object alive as long as the function: it owns the variables.
    function = signatures[name]
    function._tf_popef_owner = loaded
    return function


def keras_file_function(path: str, signature_name: Optional[str] = None):
    """A concrete function calling the `.keras` model in inference mode; inputs named after the
    model's Input layers, outputs after its output layers (or its output dict's keys)."""
    if signature_name not in (None, DEFAULT_SIGNATURE):
        raise ModelLoadError(f"{path}: a .keras file has no signatures; signature_name '{signature_name}' applies to "
                             f"SavedModel folders only")
    tf = import_tensorflow()
    import keras
    try:
        model = keras.models.load_model(path, compile=False)
    except Exception as e:
        raise ModelLoadError(f"{path}: cannot load the Keras model ({str(e).strip().splitlines()[0]})") from None
    inputs = list(model.inputs) if getattr(model, "inputs", None) else None
    if not inputs:
        raise ModelLoadError(f"{path}: the Keras model has no defined inputs (a subclassed model that was never "
                             f"built on an Input); build it with keras.Input layers")
    input_names = [_layer_name(t) for t in inputs]
    output_names = list(model.output_names)
    specs = [tf.TensorSpec(t.shape, t.dtype, name=n) for t, n in zip(inputs, input_names)]

    def serve(*args):
        outputs = model(list(args) if len(args) > 1 else args[0], training=False)
        if isinstance(outputs, dict):  # a model with named outputs: its keys are the names
            return {str(k): tf.identity(v, name=str(k)) for k, v in outputs.items()}
        flat = tf.nest.flatten(outputs)
        return {n: tf.identity(o, name=n) for n, o in zip(output_names, flat)}

    function = tf.function(serve, input_signature=specs).get_concrete_function()
    function._tf_popef_owner = model
    return function


def _layer_name(tensor) -> str:
    history = getattr(tensor, "_keras_history", None)
    if history is not None:
        return history[0].name
    return tensor.name.split(":")[0]


def load_tensorflow_function(path: str, signature_name: Optional[str] = None):
    if is_saved_model_dir(path):
        return saved_model_function(path, signature_name)
    if is_keras_file(path):
        return keras_file_function(path, signature_name)
    raise ModelLoadError(f"{path}: not a TensorFlow model (expected a SavedModel folder or a .keras file)")
