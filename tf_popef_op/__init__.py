"""tf-popef: run PopEF models on an emulated IPU.

Subpackages:
    tf_popef_op.runtime   the C++ emulator runtime (ModelRunner, RuntimeConfig, DeviceManager)
    tf_popef_op.ops       the PopefExecute TF op (C++ kernel) and its Python wrapper

Importing this package registers the PopefExecute op with TensorFlow, so

    import tf_popef_op
    model = tf.saved_model.load(path)      # (or the TF1 loader) in either import order

works, yet it never imports TensorFlow itself: the op library is loaded when TensorFlow is (see
tf_popef_op/op_registration.py), and `import tf_popef_op.runtime` alone never imports it. The op
attributes below import TensorFlow on first use (PEP 562):
    tf_popef_op.popef_execute(...)      build a PopefExecute call
    tf_popef_op.op_library_path()       the op library's path, for servers to load it
    tf_popef_op.load_op_library()       load it now, raising if it cannot be loaded
"""
from tf_popef_op.op_registration import register_when_tensorflow_imports

__version__ = "0.1.0"

register_when_tensorflow_imports()

_LAZY_OP_ATTRIBUTES = ("popef_execute", "op_library_path", "load_op_library")


def __getattr__(name):
    if name in _LAZY_OP_ATTRIBUTES:
        from tf_popef_op import ops
        return getattr(ops, name)
    raise AttributeError(f"module 'tf_popef_op' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY_OP_ATTRIBUTES))
