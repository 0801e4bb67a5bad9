"""Errors the compiler reports to its user. They describe a problem with the model, the options
or the configuration (never a bug in the compiler), so the CLI prints them as one line."""


class CompileError(Exception):
    """Base of every user-facing compiler error; the message names what failed and where."""


class ConfigError(CompileError):
    """Bad options, flags or YAML configuration."""


class ModelLoadError(CompileError):
    """The input model cannot be read (missing file, not ONNX, unreadable external data)."""


class UnknownPassError(CompileError):
    """A pass name that is not registered."""


class ConversionError(CompileError):
    """A converter pass refuses the model (dynamic shapes, bad input_shape, invalid graph...)."""


class UnsupportedOpError(CompileError):
    """A node the emulator cannot run."""


class LoweringError(CompileError):
    """A node or tensor that cannot be lowered to the emulator program (dtype, attrs, shapes)."""


class DeviceMemoryError(CompileError):
    """Weights plus activations do not fit in the target device's memory."""
