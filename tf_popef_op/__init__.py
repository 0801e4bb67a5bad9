"""tf-popef: run PopEF models on an emulated IPU.

Subpackages:
    tf_popef_op.runtime   the C++ emulator runtime (ModelRunner, RuntimeConfig, DeviceManager)
    tf_popef_op.ops       the PopefExecute TF op (C++ kernel) and its Python wrapper

Importing this package loads nothing heavy: TensorFlow is only imported on first use of the
op attributes below (PEP 562), which load the op library with ``tf.load_op_library``:
    tf_popef_op.popef_execute(...)      build a PopefExecute call
    tf_popef_op.op_library_path()       the op library's path, for servers to load it
    tf_popef_op.load_op_library()       load it now (needed before loading a SavedModel)
"""
__version__ = "0.1.0"

_LAZY_OP_ATTRIBUTES = ("popef_execute", "op_library_path", "load_op_library")


def __getattr__(name):
    if name in _LAZY_OP_ATTRIBUTES:
        from tf_popef_op import ops
        return getattr(ops, name)
    raise AttributeError(f"module 'tf_popef_op' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY_OP_ATTRIBUTES))
