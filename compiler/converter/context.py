"""What the passes know about the conversion: user options and where the model came from."""
import dataclasses
import logging
from typing import Dict, List, Optional

from compiler.errors import ConfigError
from compiler.utils import get_logger

PRECISIONS = ("fp32", "fp16")

MAX_DIM = (1 << 63) - 1  # ONNX dims are int64


@dataclasses.dataclass
class PassContext:
    model_name: str = "<model>"                      # file path or "<model bytes>", for messages
    input_shape: Dict[str, List[int]] = dataclasses.field(default_factory=dict)
    precision: str = "fp32"                          # "fp16" enables float_to_half
    batch_size: Optional[int] = None                 # None: keep the inputs' batch dims
    batch_axis: int = 0
    max_tensor_size: int = -1                        # bytes a folded constant may have; -1 = unlimited
    max_input_bytes: Optional[int] = None            # bytes one graph input may have (the device memory); None = unlimited
    winograd: str = "auto"                           # to_winograd_conv's policy (CompilerOptions.winograd)
    inverted_residual: str = "auto"                  # to_inverted_residual's (CompilerOptions.inverted_residual)
    passes_run: List[str] = dataclasses.field(default_factory=list)
    logger: logging.Logger = dataclasses.field(default_factory=lambda: get_logger("converter"))

    def __post_init__(self):
        if self.precision not in PRECISIONS:
            raise ConfigError(f"precision must be one of {', '.join(PRECISIONS)}, got '{self.precision}'")
        if self.batch_size is not None and (not _is_int(self.batch_size) or self.batch_size < 1):
            raise ConfigError(f"batch_size must be a positive integer, got {self.batch_size!r}")
        if self.batch_size is not None and self.batch_size > MAX_DIM:
            raise ConfigError(f"batch_size {self.batch_size} is larger than an ONNX dim can be ({MAX_DIM})")
        if not _is_int(self.batch_axis) or self.batch_axis < 0:
            raise ConfigError(f"batch_axis must be a non-negative integer, got {self.batch_axis!r}")
        if not _is_int(self.max_tensor_size) or self.max_tensor_size < -1:
            raise ConfigError(f"max_tensor_size must be a number of bytes or -1 (unlimited), "
                              f"got {self.max_tensor_size!r}")
        if self.max_input_bytes is not None and (not _is_int(self.max_input_bytes) or self.max_input_bytes < 0):
            raise ConfigError(f"max_input_bytes must be a number of bytes or None, got {self.max_input_bytes!r}")
        for name, dims in self.input_shape.items():
            if not isinstance(dims, (list, tuple)) or not all(_is_int(d) and d >= 0 for d in dims):
                raise ConfigError(f"input_shape for '{name}' must be a list of non-negative integers, got {dims!r}")
            if any(d > MAX_DIM for d in dims):
                raise ConfigError(f"input_shape for '{name}' has a dim larger than an ONNX dim can be ({MAX_DIM})")

    def fits_max_tensor_size(self, nbytes: int) -> bool:
        return self.max_tensor_size < 0 or nbytes <= self.max_tensor_size


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
