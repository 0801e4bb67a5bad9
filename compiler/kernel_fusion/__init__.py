"""Kernel fusion: converted ONNX -> ONNX with the emulator's internal ops (fused Conv/Gemm/MatMul
epilogues, LayerNormalization, FusedElementwise, the NCHW8c layout), between the converter and
the lowering."""
from compiler.kernel_fusion import passes  # noqa: F401  (registers the passes)
from compiler.kernel_fusion.pipeline import (
    BLOCKED_LAYOUT_PASS, KERNEL_FUSION_PIPELINE, apply_kernel_fusion, run_kernel_fusions,
)

__all__ = ["BLOCKED_LAYOUT_PASS", "KERNEL_FUSION_PIPELINE", "apply_kernel_fusion", "run_kernel_fusions"]
