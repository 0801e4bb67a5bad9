"""One loaded model version: a SavedModel's signatures, callable from any thread.

Predictor choice: TF2 `tf.saved_model.load` and its signature ConcreteFunctions, not a TF1
`Session.run`. Exported PopEF SavedModels are TF2 objects whose op holds a runtime resource
created by the restored graph; the TF2 loader restores and initialises it, keeps it alive
with the servable, and a signature call is thread-safe and needs no session bookkeeping.
TF1 SavedModels (e.g. classify/regress signatures built with SavedModelBuilder) load the
same way through their wrapped signatures. Signature metadata comes straight from
saved_model.pb, so GetModelMetadata answers exactly what was exported.
"""
import os
from typing import Dict, Mapping

import numpy as np

from serving.model_server.errors import as_serving_error, invalid_argument, not_found

DEFAULT_SIGNATURE = "serving_default"
SERVE_TAG = "serve"


def _format_shape(shape) -> str:
    return "[" + ",".join("-1" if d is None else str(d) for d in shape) + "]"


def _dtype_name(dtype) -> str:
    from tensorflow.core.framework import types_pb2
    return types_pb2.DataType.Name(dtype.as_datatype_enum)


class Servable:
    """A SavedModel version. Construction is cheap; `load()` does the work (call once);
    afterwards every method is thread-safe and the object is immutable."""

    def __init__(self, name: str, version: int, path: str, tags=(SERVE_TAG,)):
        self.name = name
        self.tags = [t.strip() for t in tags if t.strip()]
        self.version = version
        self.path = path
        self._loaded = None
        self._functions = {}
        self.signature_defs = {}
        self.unloaded = False

    def load(self) -> None:
        import tensorflow as tf
        from tensorflow.core.protobuf import saved_model_pb2
        proto = saved_model_pb2.SavedModel()
        with open(os.path.join(self.path, "saved_model.pb"), "rb") as handle:
            proto.ParseFromString(handle.read())
        graphs = [g for g in proto.meta_graphs if set(self.tags) == set(g.meta_info_def.tags)]
        if not graphs:
            raise not_found(
                f"Could not find meta graph def matching supplied tags: {{ {' '.join(self.tags)} }}"
                f" in {self.path}. To inspect available tag-sets, use saved_model_cli.")
        self.signature_defs = dict(graphs[0].signature_def)
        self._loaded = tf.saved_model.load(self.path, tags=self.tags)
        self._functions = dict(self._loaded.signatures)
        # Signatures such as `__saved_model_init_op` are not callable; serve only those the
        # loader turned into functions.
        self.signature_defs = {k: v for k, v in self.signature_defs.items()
                               if k in self._functions}

    def unload(self) -> None:
        """Marks the version unloaded. Requests that already hold it finish normally; the
        model's memory (and its runtime, for PopEF models) is released with the last
        reference, so an unload never fails a request in flight."""
        self.unloaded = True

    def signature_def(self, signature_name: str):
        key = signature_name or DEFAULT_SIGNATURE
        signature = self.signature_defs.get(key)
        if signature is None:
            raise invalid_argument(f'Serving signature key "{key}" not found.')
        return key, signature

    def input_specs(self, signature_name: str) -> Mapping[str, object]:
        key, _ = self.signature_def(signature_name)
        _, kwargs = self._functions[key].structured_input_signature
        return kwargs

    def check_inputs(self, signature_name: str, inputs: Mapping[str, np.ndarray]):
        """{name: tf.Tensor} after checking names, dtypes and shapes against the signature."""
        import tensorflow as tf
        key, _ = self.signature_def(signature_name)
        specs = self.input_specs(key)
        _check_input_names(inputs, specs)
        feeds = {}
        for name, value in inputs.items():
            spec = specs[name]
            tensor = tf.convert_to_tensor(value)
            if tensor.dtype != spec.dtype:
                raise invalid_argument(
                    f"input '{name}' has dtype {_dtype_name(tensor.dtype)} but signature "
                    f"'{key}' expects {_dtype_name(spec.dtype)}")
            if not spec.shape.is_compatible_with(tensor.shape):
                raise invalid_argument(
                    f"input '{name}' has shape {_format_shape(tensor.shape)} but signature "
                    f"'{key}' expects {_format_shape(spec.shape)}")
            feeds[name] = tensor
        return feeds

    def run(self, signature_name: str, inputs: Mapping[str, np.ndarray]) -> Dict[str, np.ndarray]:
        """Calls a signature; inputs must match its names, dtypes and shapes."""
        key, _ = self.signature_def(signature_name)
        feeds = self.check_inputs(key, inputs)
        try:
            outputs = self._functions[key](**feeds)
        except Exception as error:  # TF errors keep their canonical code
            raise as_serving_error(error) from None
        return {name: value.numpy() for name, value in outputs.items()}


def _check_input_names(inputs, specs) -> None:
    sent, expected = set(inputs), set(specs)
    if sent == expected:
        return
    def fmt(names):
        return "{" + ",".join(sorted(names)) + "}"
    raise invalid_argument(
        f"input size does not match signature: {len(sent)}!={len(expected)} len({fmt(sent)}) "
        f"!= len({fmt(expected)}). Sent extra: {fmt(sent - expected)}. Missing but required: "
        f"{fmt(expected - sent)}.")
