"""TensorFlow concrete function -> ONNX ModelProto with tf2onnx.

`tf2onnx.convert.from_keras` is broken with Keras 3, so the model is always a concrete function
(a SavedModel signature, or a wrapper of a `.keras` model) given to tf2onnx's function path. The
graph inputs and outputs are renamed to the signature's names, which become the anchor names.
tf2onnx's failures are turned into a ModelLoadError naming the model and the TF ops it could not
convert; ops that standard Keras layers produce and tf2onnx lacks are handled by
`tf_op_handlers.CUSTOM_OP_HANDLERS`, and XLA-compiled Keras functions are inlined first.
"""
import logging
import os
from typing import Optional

import onnx

from compiler.errors import ModelLoadError
from compiler.frontends.tf_source import load_tensorflow_function

DEFAULT_TF_OPSET = 17


def tensorflow_to_onnx(path, signature_name: Optional[str] = None, opset: Optional[int] = None) -> onnx.ModelProto:
    """The SavedModel folder or `.keras` file at `path` as an ONNX model of opset `opset` (17 by default)."""
    path = os.fspath(path)
    opset = DEFAULT_TF_OPSET if opset is None else int(opset)
    function = load_tensorflow_function(path, signature_name)
    return concrete_function_to_onnx(function, opset, path)


def concrete_function_to_onnx(function, opset: int, label: str) -> onnx.ModelProto:
    tf = _quiet_tf2onnx_imports()
    from tf2onnx import convert, tf_loader  # noqa: F401
    from compiler.frontends.tf_op_handlers import CUSTOM_OP_HANDLERS

    # function.inputs ends with the captured tensors: variables (resources, frozen into
    # constants) and plain tensors a layer captured (Keras' Normalization keeps its mean and
    # variance so), which freezing also makes constants; as graph inputs they would be unread.
    arguments = function.inputs[:len(function.inputs) - len(function.captured_inputs)]
    input_names = [t.name for t in arguments if t.dtype != tf.dtypes.resource]
    output_names = [t.name for t in function.outputs if t.dtype != tf.dtypes.resource]
    renames = signature_names(tf, function, input_names, output_names)
    try:
        with tf.device("/cpu:0"):
            frozen = tf_loader.from_function(function, input_names, output_names)
            frozen = inline_xla_functions(tf, tf_loader, frozen, input_names, output_names)
            model, _ = convert._convert_common(  # the body of tf2onnx.convert.from_function
                frozen, name=function.name, continue_on_error=True, opset=opset,
                custom_op_handlers=CUSTOM_OP_HANDLERS, input_names=input_names, output_names=output_names,
                tensors_to_rename=renames)
    except Exception as e:
        raise ModelLoadError(f"{label}: tf2onnx cannot export the model to ONNX opset {opset}: "
                             f"{str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}") from None
    unconverted = sorted({n.op_type for n in model.graph.node
                          if n.domain not in ("", "ai.onnx") or not onnx.defs.has(n.op_type)})
    if unconverted:
        raise ModelLoadError(f"{label}: tf2onnx left TensorFlow op(s) it cannot convert: {', '.join(unconverted)}")
    return model


_CALL_OPS = ("StatefulPartitionedCall", "PartitionedCall")


def inline_xla_functions(tf, tf_loader, graph_def, input_names, output_names):
    """Keras 3 runs some layers (e.g. Conv with groups > 1) in a `jit_compile=True` function,
    which grappler refuses to inline, so tf2onnx would see an opaque call. Dropping the XLA
    markers and optimizing again inlines them (the math is the same; XLA only compiles it)."""
    calls = [n for n in graph_def.node if n.op in _CALL_OPS and "_XlaMustCompile" in n.attr]
    if not calls:
        return graph_def
    for node in calls:
        del node.attr["_XlaMustCompile"]
    for function in graph_def.library.function:
        for marker in ("_XlaMustCompile", "_noinline"):
            if marker in function.attr:
                del function.attr[marker]
    with tf.Graph().as_default():
        return tf_loader.tf_optimize(input_names, output_names, graph_def)


def signature_names(tf, function, input_names, output_names) -> dict:
    """Graph tensor name -> the signature's name for it: the keys of the structured inputs and
    outputs (for a loaded SavedModel signature tf2onnx's own helper misses the outputs)."""
    renames = {}
    args, kwargs = function.structured_input_signature
    specs = tf.nest.flatten(args) + [kwargs[k] for k in sorted(kwargs)]
    keyed = [getattr(s, "name", None) for s in tf.nest.flatten(args)] + sorted(kwargs)
    if len(specs) == len(input_names):
        renames.update({t: k for t, k in zip(input_names, keyed) if k})
    outputs = function.structured_outputs
    if isinstance(outputs, dict):
        keys = sorted(outputs)  # tf.nest flattens dicts in sorted key order, as function.outputs are
        if len(keys) == len(output_names):
            renames.update(zip(output_names, keys))
    return renames


def _quiet_tf2onnx_imports():
    from compiler.frontends.tf_source import import_tensorflow
    tf = import_tensorflow()
    for name in ("tf2onnx", "tf2onnx.tfonnx", "tf2onnx.tf_utils", "tf2onnx.optimizer", "tf2onnx.shape_inference"):
        logging.getLogger(name).setLevel(logging.ERROR)
    return tf
