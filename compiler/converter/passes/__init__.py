"""Every converter pass module; importing this package registers them all. Their order here is
alphabetical; the default pipeline order is in compiler/converter/pipeline.py."""
from compiler.converter.passes import (  # noqa: F401
    const_batch_size, constant_folding, dead_code_elimination, eliminate_identity, eliminate_nop_cast,
    eliminate_nop_reshape, eliminate_nop_transpose, eliminate_unused_initializers, final_check,
    float_to_half, fuse_consecutive_transposes, input_shape_override, shape_inference, sort_graph,
)
from compiler.converter.passes import unroll_control_flow  # noqa: F401,E402
from compiler.converter.passes import decompose_einsum  # noqa: F401,E402
from compiler.converter.passes import fold_batchnorm, fuse_epilogue  # noqa: F401,E402  (issue 5)
from compiler.converter.passes import (  # noqa: F401,E402  (issue 5: transformer fusions)
    fold_scale_into_matmul, fuse_elementwise_chain, fuse_layernorm, hoist_matmul_reshape,
    merge_transposes_across_unit_reshape,
)
from compiler.converter.passes import fold_conv_affine, fold_pad_into_conv  # noqa: F401,E402  (issue 5)
from compiler.converter.passes import to_nchwc_layout  # noqa: F401,E402  (NCHW8c blocked layout, last kernel fusion)
