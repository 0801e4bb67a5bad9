"""PopRT's CompilerOptions: attribute-style settings of the compile step."""
import dataclasses
from typing import Optional

from compiler.errors import ConfigError
from compiler.lowering.device_memory import IPU_VERSIONS

WINOGRAD_POLICIES = ("auto", "off", "f2x2", "f4x4")
INVERTED_RESIDUAL_POLICIES = ("auto", "off", "all")


@dataclasses.dataclass(slots=True)  # slots: a misspelt attribute raises instead of being ignored
class CompilerOptions:
    ipu_version: str = "ipu2"                  # target device: "ipu2" or "ipu21"
    num_ipus: int = 1
    batch_size: Optional[int] = None           # None: the inputs' dim batch_axis (recorded in Metadata)
    batch_axis: int = 0
    max_tensor_size: int = -1                  # bytes a folded constant may have; -1 unlimited
    device_memory_bytes: Optional[int] = None  # per IPU; None: 1472 tiles x 624 KiB = 940,572,672
    kernel_fusion: bool = True                 # fused Conv/Gemm/MatMul epilogues (KERNEL_FUSION_PIPELINE)
    blocked_layout: bool = True                # conv chains in the NCHW8c layout (to_nchwc_layout; with kernel_fusion)
    # Blocked 3x3 stride-1 float32 convs as Winograd F(m x m, 3x3) (to_winograd_conv): "auto" where
    # measured faster, "off", or "f2x2" / "f4x4" on every eligible layer (for measuring).
    winograd: str = "auto"
    # MobileNetV2-style expand 1x1 -> depthwise -> project 1x1 blocks as one NchwcInvertedResidual
    # step (to_inverted_residual): "auto" where measured faster, "off", or "all" (for measuring).
    inverted_residual: str = "auto"

    def validate(self) -> "CompilerOptions":
        def positive_int(name, value, allow_none=False, minimum=1):
            if value is None and allow_none:
                return
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise ConfigError(f"CompilerOptions.{name} must be an integer >= {minimum}, got {value!r}")

        if self.ipu_version not in IPU_VERSIONS:
            raise ConfigError(f"CompilerOptions.ipu_version must be one of {', '.join(IPU_VERSIONS)}, "
                              f"got {self.ipu_version!r}")
        positive_int("num_ipus", self.num_ipus)
        positive_int("batch_size", self.batch_size, allow_none=True)
        positive_int("batch_axis", self.batch_axis, minimum=0)
        positive_int("max_tensor_size", self.max_tensor_size, minimum=-1)
        positive_int("device_memory_bytes", self.device_memory_bytes, allow_none=True, minimum=0)
        for name in ("kernel_fusion", "blocked_layout"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"CompilerOptions.{name} must be True or False, got {getattr(self, name)!r}")
        if self.winograd not in WINOGRAD_POLICIES:
            raise ConfigError(f"CompilerOptions.winograd must be one of {', '.join(WINOGRAD_POLICIES)}, "
                              f"got {self.winograd!r}")
        if self.inverted_residual not in INVERTED_RESIDUAL_POLICIES:
            raise ConfigError(f"CompilerOptions.inverted_residual must be one of "
                              f"{', '.join(INVERTED_RESIDUAL_POLICIES)}, got {self.inverted_residual!r}")
        return self

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
