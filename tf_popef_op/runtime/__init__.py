"""The IPU emulator runtime: runs PopEF files on the CPU.

    from tf_popef_op import runtime
    config = runtime.RuntimeConfig()
    config.batching_dim = 0
    with runtime.ModelRunner("model.popef", config) as runner:
        outputs = runner.execute({"X": x, "Y": y})

The work is done by the C++ library ``tf_popef_op/lib/libtfpopef_runtime.so`` through the
``_runtime`` extension; this package never imports TensorFlow.
"""
from tf_popef_op.runtime._runtime import (  # noqa: F401
    BATCHING_OFF,
    DEVICE_MEMORY_BYTES,
    AnchorDescriptor,
    DeviceManager,
    Future,
    ModelRunner,
    RuntimeConfig,
    kernel_ops,
    num_threads,
)
from tf_popef_op.runtime.profiling import format_profile, profile_by_op  # noqa: F401
from tf_popef_op.runtime.errors import (  # noqa: F401
    DataLossError,
    DeadlineExceededError,
    Error,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    UnimplementedError,
    error_from_code,
)

__all__ = [
    "AnchorDescriptor", "BATCHING_OFF", "DEVICE_MEMORY_BYTES", "DeviceManager", "Future", "ModelRunner",
    "RuntimeConfig", "kernel_ops", "num_threads", "format_profile", "profile_by_op",
    "Error", "InvalidArgumentError", "NotFoundError", "FailedPreconditionError", "DeadlineExceededError",
    "UnimplementedError", "ResourceExhaustedError", "DataLossError", "InternalError", "error_from_code",
]
