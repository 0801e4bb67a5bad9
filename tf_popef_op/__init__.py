"""tf-popef: run PopEF models on an emulated IPU.

Subpackages:
    tf_popef_op.runtime   the C++ emulator runtime (ModelRunner, RuntimeConfig, DeviceManager)

Importing this package loads nothing heavy: TensorFlow is only imported by the TF op module.
"""
__version__ = "0.1.0"
