"""The default pass pipeline (the one place its order is written) and the pass manager."""
from typing import List, Optional, Sequence

import onnx

from compiler.converter.context import PassContext
from compiler.converter.pass_registry import get_pass

DEFAULT_PIPELINE: List[str] = [
    "input_shape_override",          # --input_shape
    "const_batch_size",              # --batch_size
    "constant_folding",              # also folds Shape/Size of static tensors
    "unroll_control_flow",           # Scan; Loop/If decided at compile time (tf2onnx's RNNs); refolds
    "decompose_einsum",              # Einsum -> Transpose/Reshape/MatMul (needs the static shapes)
    "fold_batchnorm",                # BN into Conv/Gemm/MatMul weights, in fp32 (before float_to_half)
    "fold_conv_affine",              # per-channel Mul/Add/Sub/Div by constants into those weights, in fp32
    "fold_pad_into_conv",            # zero Pad of the spatial axes into Conv / AveragePool pads
    "float_to_half",                 # --precision fp16; after folding so constants fold in fp32
    "eliminate_identity",
    "eliminate_nop_cast",
    "eliminate_nop_reshape",
    "fuse_consecutive_transposes",
    "eliminate_nop_transpose",       # after fusion: two transposes may compose to identity
    "dead_code_elimination",
    "eliminate_unused_initializers",
    "shape_inference",               # strict; every runtime tensor must now be static
    "sort_graph",
    "final_check",
]

# Passes the compile step runs on the converted model right before lowering (lower_graph):
# they write the emulator's internal ops (domain ai.tfpopef), so the converter's own output
# stays standard ONNX that onnxruntime and onnx.reference can run and check.
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

_MAX_REPEATS = 10


def resolve_pipeline(used_passes: Optional[Sequence[str]] = None,
                     skip_passes: Optional[Sequence[str]] = None) -> List[str]:
    """used_passes (run only these, in this order) or the default pipeline, minus skip_passes.
    Unknown names raise UnknownPassError listing the known ones."""
    names = list(used_passes) if used_passes else list(DEFAULT_PIPELINE)
    skip = list(skip_passes or [])
    for name in names + skip:
        get_pass(name)
    return [n for n in names if n not in skip]


def _fingerprint(model: onnx.ModelProto):
    g = model.graph
    return (tuple((n.op_type, tuple(n.input), tuple(n.output)) for n in g.node),
            tuple(t.name for t in g.initializer))


def run_passes(model: onnx.ModelProto, names: Sequence[str], ctx: PassContext) -> onnx.ModelProto:
    for name in names:
        info = get_pass(name)
        ctx.logger.debug("running pass %s", name)
        for _ in range(1 if info.idempotent else _MAX_REPEATS):
            before = _fingerprint(model)
            model = info.run(model, ctx)
            if _fingerprint(model) == before:
                break
        ctx.passes_run.append(name)
    return model


def run_kernel_fusions(model: onnx.ModelProto, model_name: str = "<model>",
                       blocked_layout: bool = True) -> onnx.ModelProto:
    """KERNEL_FUSION_PIPELINE on a copy of `model` (the caller's model is left as it was);
    blocked_layout=False leaves out the NCHW8c layout pass."""
    import copy
    names = [n for n in KERNEL_FUSION_PIPELINE if blocked_layout or n != BLOCKED_LAYOUT_PASS]
    return run_passes(copy.deepcopy(model), names, PassContext(model_name=model_name))
