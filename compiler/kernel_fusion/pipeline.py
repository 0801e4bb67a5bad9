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
    "fuse_attention",                # head transposes -> Q·Kᵀ -> Softmax -> ·V -> transpose back: one Attention
    "merge_transposes_across_unit_reshape",  # Transpose -> Reshape(size-1 axes) -> Transpose: one Transpose
    "fuse_layernorm",                # decomposed mean/variance/rsqrt/affine chain -> LayerNormalization
    "sink_transposes_below_elementwise",  # Add(T(a), T(b)) -> T(Add(a, b)): ConvNeXt's stream channels last
    "fuse_consecutive_transposes",   # what the sinking left back to back (converter passes, rerun here)
    "eliminate_nop_transpose",
    "dead_code_elimination",         # the Transposes those two left unread
    "per_channel_affine_to_depthwise_conv",  # DenseNet's pre-activation BN Mul -> Add: a 1x1 depthwise Conv
    "hoist_matmul_reshape",          # MatMul -> Reshape(keeps N) -> epilogue: the Reshape moves to the input
    "fold_column_scale_into_matmul",  # ConvNeXt's layer scale Mul(γ[N]) after Dense -> the weights and bias
    "fuse_epilogue",                 # Conv/Gemm/MatMul + bias + sum + activation -> FusedConv/FusedGemm/FusedMatMul
    "merge_qkv_projections",         # self-attention's Q/K/V FusedMatMuls on one input -> one over [Wq | Wk | Wv]
    "fuse_elementwise_chain",        # what elementwise chains remain -> FusedElementwise (one loop)
    "to_nchwc_layout",               # conv chains (FusedConv...) -> NCHW8c blocked layout; sees the fused ops
    "fold_transposes_into_nchwc_reorders",  # ToNchwc(T to NCHW), T(FromNchwc) to NHWC -> channels_last reorders
    "fold_input_transpose_into_nchwc_conv",  # the stem's NchwcConv(T to NCHW of x, C = 1 or 3) reads x channels last
    "fuse_channels_last_depthwise",  # ToNchwc -> depthwise -> FromNchwc -> LayerNorm: one channels-last step
    "share_strided_subsample",       # strided 1x1 NchwcConvs on one X -> one subsample step, stride-1 convs
    "subsample_into_producer",       # a stride-1 NchwcConv read only through a subsample -> computes only its pixels
    "to_winograd_conv",              # 3x3 stride-1 NchwcConvs -> NchwcWinogradConv (transformed weights)
    "fold_channel_scale_into_nchwc_conv",  # squeeze-and-excite's Mul(X, S) -> the next NchwcConv's input scale
    "to_inverted_residual",          # expand 1x1 -> depthwise -> project 1x1 NchwcConvs -> NchwcInvertedResidual
]
BLOCKED_LAYOUT_PASS = "to_nchwc_layout"  # left out of KERNEL_FUSION_PIPELINE by CompilerOptions.blocked_layout=False
WINOGRAD_PASS = "to_winograd_conv"  # left out by CompilerOptions.winograd="off"
INVERTED_RESIDUAL_PASS = "to_inverted_residual"  # left out by CompilerOptions.inverted_residual="off"


def run_kernel_fusions(model: onnx.ModelProto, model_name: str = "<model>",
                       blocked_layout: bool = True, winograd: str = "auto",
                       inverted_residual: str = "auto") -> onnx.ModelProto:
    """KERNEL_FUSION_PIPELINE on a copy of `model` (the caller's model is left as it was);
    blocked_layout=False leaves out the NCHW8c layout pass, winograd="off" the Winograd one and
    inverted_residual="off" the fused-block one (both need the blocked layout); winograd and
    inverted_residual are those passes' policies."""
    left_out = {BLOCKED_LAYOUT_PASS} if not blocked_layout else set()
    if winograd == "off" or not blocked_layout:
        left_out.add(WINOGRAD_PASS)
    if inverted_residual == "off" or not blocked_layout:
        left_out.add(INVERTED_RESIDUAL_PASS)
    names = [n for n in KERNEL_FUSION_PIPELINE if n not in left_out]
    return run_passes(copy.deepcopy(model), names, PassContext(model_name=model_name, winograd=winograd,
                                                               inverted_residual=inverted_residual))


def apply_kernel_fusion(model: onnx.ModelProto, options, model_name: str = "<model>") -> onnx.ModelProto:
    """The stage as the compile step runs it: per the CompilerOptions `options` (kernel_fusion,
    blocked_layout, winograd, inverted_residual), the model itself when kernel fusion is off."""
    if not options.kernel_fusion:
        return model
    return run_kernel_fusions(model, model_name, options.blocked_layout, options.winograd, options.inverted_residual)
