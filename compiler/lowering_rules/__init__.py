"""How each ONNX op (and each internal op the kernel fusion writes) maps to an emulator kernel:
the rule registry and every rule module. Importing this package registers them all; the
converter's final_check and the lowering both consult it."""
from compiler.lowering_rules import (  # noqa: F401
    activations, attention, binary, cast, channels_last_depthwise, concat, conv, data_movement, elementwise_logic,
    fused_elementwise, fused_ops, gemm, matmul, nchwc, nchwc_inverted_residual, nchwc_winograd, normalization, pool,
    recurrent, reduce, resize, softmax, static_values, transpose, views,
)
from compiler.lowering_rules.lowerability import check_lowerable
from compiler.lowering_rules.registry import CONTROL_FLOW_OPS, find_rule, is_control_flow, supported_ops

__all__ = ["CONTROL_FLOW_OPS", "check_lowerable", "find_rule", "is_control_flow", "supported_ops"]
