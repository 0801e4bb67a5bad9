"""The kernel fusion stage: the passes the compile step runs on the converted model right before
lowering. They write the emulator's internal ops (domain ai.tfpopef), so the converter's own
output stays standard ONNX that onnxruntime and onnx.reference can run and check."""
import copy
from typing import List

import onnx

from compiler.converter.context import PassContext
from compiler.converter.pipeline import run_passes

KERNEL_FUSION_PIPELINE: List[str] = [
    "fold_scale_into_matmul",        # attention's scores·(1/√d) Mul -> the query projection's weights
    "merge_transposes_across_unit_reshape",  # Transpose -> Reshape(size-1 axes) -> Transpose: one Transpose
    "fuse_layernorm",                # decomposed mean/variance/rsqrt/affine chain -> LayerNormalization
    "hoist_matmul_reshape",          # MatMul -> Reshape(keeps N) -> epilogue: the Reshape moves to the input
    "fuse_epilogue",                 # Conv/Gemm/MatMul + bias + sum + activation -> FusedConv/FusedGemm/FusedMatMul
    "fuse_elementwise_chain",        # what elementwise chains remain -> FusedElementwise (one loop)
    "to_nchwc_layout",               # conv chains (FusedConv...) -> NCHW8c blocked layout; last: sees the fused ops
]
BLOCKED_LAYOUT_PASS = "to_nchwc_layout"  # left out of KERNEL_FUSION_PIPELINE by CompilerOptions.blocked_layout=False


def run_kernel_fusions(model: onnx.ModelProto, model_name: str = "<model>",
                       blocked_layout: bool = True) -> onnx.ModelProto:
    """KERNEL_FUSION_PIPELINE on a copy of `model` (the caller's model is left as it was);
    blocked_layout=False leaves out the NCHW8c layout pass."""
    names = [n for n in KERNEL_FUSION_PIPELINE if blocked_layout or n != BLOCKED_LAYOUT_PASS]
    return run_passes(copy.deepcopy(model), names, PassContext(model_name=model_name))


def apply_kernel_fusion(model: onnx.ModelProto, options, model_name: str = "<model>") -> onnx.ModelProto:
    """The stage as the compile step runs it: per the CompilerOptions `options` (kernel_fusion,
    blocked_layout), the model itself when kernel fusion is off."""
    return run_kernel_fusions(model, model_name, options.blocked_layout) if options.kernel_fusion else model
