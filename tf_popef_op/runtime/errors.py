"""Exceptions raised by the emulator runtime, one per runtime error code.

The C++ binding turns every runtime error into ``error_from_code(code, message)`` (the only
mapping from codes to classes). Each class also derives from the closest builtin, so callers
can catch ``ValueError``, ``FileNotFoundError``, ``TimeoutError``... without importing these.
"""


class Error(RuntimeError):
    """Base class; ``code`` is the runtime's error code name, e.g. ``"INVALID_ARGUMENT"``."""

    code = "UNKNOWN"

    def __init__(self, message: str = ""):
        super().__init__(message)
        self.message = message


class InvalidArgumentError(Error, ValueError):
    """Bad anchor name, dtype, shape, index or option."""
    code = "INVALID_ARGUMENT"


class NotFoundError(Error, FileNotFoundError):
    """A missing PopEF file."""
    code = "NOT_FOUND"


class FailedPreconditionError(Error):
    """Incompatible device or IPU version, not enough device memory, closed runner."""
    code = "FAILED_PRECONDITION"


class DeadlineExceededError(Error, TimeoutError):
    """A wait ran out of time."""
    code = "DEADLINE_EXCEEDED"


class UnimplementedError(Error, NotImplementedError):
    """An op, dtype or format feature the emulator does not support."""
    code = "UNIMPLEMENTED"


class ResourceExhaustedError(Error):
    """Out of host or device memory."""
    code = "RESOURCE_EXHAUSTED"


class DataLossError(Error, ValueError):
    """A corrupted or truncated PopEF file."""
    code = "DATA_LOSS"


class InternalError(Error):
    """A bug in the runtime."""
    code = "INTERNAL"


_BY_CODE = {cls.code: cls for cls in (
    InvalidArgumentError, NotFoundError, FailedPreconditionError, DeadlineExceededError,
    UnimplementedError, ResourceExhaustedError, DataLossError, InternalError)}


def error_from_code(code: str, message: str) -> Error:
    """The exception for a runtime error code (unknown codes give a plain Error)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        err = Error(message)
        err.code = code
        return err
    return cls(message)
