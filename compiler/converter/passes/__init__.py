"""Every converter pass module (ONNX -> ONNX, standard ops only); importing this package registers
them all. Their order here is alphabetical; the default pipeline order is in
compiler/converter/pipeline.py."""
from compiler.converter.passes import (  # noqa: F401
    const_batch_size, constant_folding, dead_code_elimination, decompose_einsum, eliminate_identity,
    eliminate_nop_cast, eliminate_nop_reshape, eliminate_nop_transpose, eliminate_unused_initializers,
    eliminate_unused_inputs, final_check, float_to_half, fold_batchnorm, fold_conv_affine, fold_pad_into_conv,
    fuse_consecutive_transposes, input_shape_override, input_size_check, input_type_check, shape_inference, sort_graph,
    unroll_control_flow,
)
