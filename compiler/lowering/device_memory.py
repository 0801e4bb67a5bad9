"""Device memory limits: an IPU (ipu2 and ipu21 alike) has 1472 tiles x 624 KiB."""
from typing import Optional

from compiler.errors import DeviceMemoryError

IPU_VERSIONS = ("ipu2", "ipu21")
IPU_MEMORY_BYTES = 1472 * 624 * 1024  # 940,572,672 bytes per IPU


def available_bytes(num_ipus: int, device_memory_bytes: Optional[int] = None) -> int:
    """device_memory_bytes overrides the per-IPU size (e.g. to target a smaller budget)."""
    return (IPU_MEMORY_BYTES if device_memory_bytes is None else device_memory_bytes) * num_ipus


def check_device_memory(weights_bytes: int, arena_bytes: int, available: int, ipu_version: str,
                        model_name: str) -> None:
    needed = weights_bytes + arena_bytes
    if needed > available:
        raise DeviceMemoryError(
            f"{model_name}: the model needs {needed:,} bytes of device memory (weights {weights_bytes:,} + "
            f"activations {arena_bytes:,}) but the {ipu_version} device has {available:,}; reduce the batch "
            f"size or the input shapes, or use --precision fp16")


def check_anchor_sizes(anchors, available: int, ipu_version: str, model_name: str) -> None:
    """An input or output is streamed through device memory, so each must fit it on its own
    (this also refuses absurd shapes before anything is allocated for them)."""
    for tensor in anchors:
        if tensor.nbytes > available:
            raise DeviceMemoryError(
                f"{model_name}: {tensor.storage} '{tensor.anchor or tensor.name}' ({tensor.dtype} "
                f"{list(tensor.shape)}) needs {tensor.nbytes:,} bytes, more than the {ipu_version} device's "
                f"{available:,}; reduce the batch size or the input shapes")
