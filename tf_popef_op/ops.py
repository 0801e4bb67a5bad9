"""The PopefExecute TF op: its library and a Python wrapper for building graphs.

    import tf_popef_op
    outputs = tf_popef_op.popef_execute(path, [x, y], input_names=["graph0/X", "graph0/Y"],
                                        output_names=["graph0/O"], output_dtypes=[tf.float32],
                                        output_shapes=[[2]], index=0)

The op (tf_popef_op/op/cc) is a C++ AsyncOpKernel that calls the IPU emulator runtime
directly; it links the same runtime library as ``tf_popef_op.runtime``, so a process has one
DeviceManager. The library is built by setup.py into ``tf_popef_op/lib/_popef_ops.so``;
``TF_POPEF_OP_LIBRARY`` points the wrapper at another build of it (e.g. the Bazel one).
This module imports TensorFlow only inside its functions: tf_popef_op/op_registration.py calls
``load_op_library`` once TensorFlow is imported.
"""
import os
import threading
from typing import Optional, Sequence

LIBRARY_ENV = "TF_POPEF_OP_LIBRARY"
LIBRARY_NAME = "_popef_ops.so"

OP_NAME = "PopefExecute"
REGISTRATION_HINT = (
    f"Register the {OP_NAME} op before loading a SavedModel exported from a PopEF: "
    f"`import tf_popef_op` (Python, TF2 or TF1 loader), `python -m tf_popef_op.saved_model_cli` "
    f"instead of saved_model_cli, or `--custom_op_paths=<op library>` for a model server "
    f"(library: `python -c 'import tf_popef_op; print(tf_popef_op.op_library_path())'`)")

_lock = threading.Lock()
_module = None


def op_library_path() -> str:
    """Path of the op library: $TF_POPEF_OP_LIBRARY, else the one built into this package.

    Servers load it with ``tf.load_op_library(path)`` before loading a SavedModel that uses it.
    """
    override = os.environ.get(LIBRARY_ENV)
    if override:
        return os.path.abspath(override)
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib", LIBRARY_NAME)


def load_op_library():
    """Loads the op library once per process (``tf.load_op_library``) and returns its module."""
    global _module
    # Imported before taking the lock: a first `import tensorflow` runs op_registration's hook,
    # which calls this function again.
    import tensorflow as tf
    with _lock:
        if _module is None:
            path = op_library_path()
            if not os.path.exists(path):
                raise FileNotFoundError(
                    f"{path}: the {OP_NAME} op library is missing; build it with "
                    f"`python setup.py build_ext --inplace` (make build)")
            _module = tf.load_op_library(path)
        return _module


def missing_op_hint(message: str) -> str:
    """How to register the op, for an error `message` that says it is not registered; else ''."""
    if "not registered" in message and f"'{OP_NAME}'" in message:
        return REGISTRATION_HINT
    return ""


def popef_execute(popef_path, inputs: Sequence, input_names: Sequence[str], output_names: Sequence[str],
                  output_dtypes: Sequence, output_shapes: Sequence, batching_dim: int = -1,
                  timeout_ns: int = 5_000_000, index: int = -1, name: Optional[str] = None):
    """Runs one subgraph of a PopEF on the emulator; returns the list of output tensors.

    popef_path: scalar string tensor (a SavedModel asset path) or str.
    inputs / input_names: tensors and the anchors (names or aliases) they feed.
    output_names / output_dtypes / output_shapes: the anchors returned, their dtypes and static
        shapes, with None (or -1) for the batch dimension of outputs the runtime batches.
    batching_dim: RuntimeConfig.batching_dim, -1 = off. timeout_ns: RuntimeConfig.timeout_ns.
    index: the subgraph of a fused executable, -1 for a single-model PopEF.
    """
    import tensorflow as tf
    shapes = [tf.TensorShape([None if d is None or d < 0 else d for d in shape]) for shape in output_shapes]
    return load_op_library().popef_execute(
        popef_path=popef_path, inputs=list(inputs), Tout=[tf.as_dtype(d) for d in output_dtypes],
        input_names=list(input_names), output_names=list(output_names), output_shapes=shapes,
        batching_dim=int(batching_dim), timeout_ns=int(timeout_ns), index=int(index), name=name)
