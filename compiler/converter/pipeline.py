"""The default pass pipeline (the one place its order is written), the control-flow body pipeline
and the pass manager."""
from typing import List, Optional, Sequence

import onnx

from compiler.converter.context import PassContext
from compiler.converter.pass_registry import get_pass

DEFAULT_PIPELINE: List[str] = [
    "input_shape_override",          # --input_shape
    "const_batch_size",              # --batch_size
    "input_type_check",              # each input has an element type the emulator supports
    "input_size_check",              # each input fits the device, before anything allocates from shapes
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

# Registered passes the default pipeline leaves out because they change the model's declared
# interface; a --passes / `passes:` list that names them runs them.
OPT_IN_PASSES: List[str] = [
    "eliminate_unused_inputs",       # like onnxruntime, a model keeps every input it declares by default
]

# The passes that make a control-flow body (If branch, Loop body, as a standalone model) ready
# for lowering: the compile step hands prepare_control_flow_body to the lowering.
CONTROL_FLOW_BODY_PIPELINE: List[str] = ["constant_folding", "unroll_control_flow", "shape_inference"]

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


def prepare_control_flow_body(model: onnx.ModelProto, where: str) -> onnx.ModelProto:
    """CONTROL_FLOW_BODY_PIPELINE on a body model; `where` names it in errors."""
    return run_passes(model, CONTROL_FLOW_BODY_PIPELINE, PassContext(model_name=where))
