"""Every kernel fusion pass module; importing this package registers them in the converter's pass
registry (so --passes / --list_all_passes know them). The pipeline order is in
compiler/kernel_fusion/pipeline.py."""
from compiler.kernel_fusion.passes import (  # noqa: F401
    fold_channel_scale_into_nchwc_conv, fold_column_scale_into_matmul, fold_input_transpose_into_nchwc_conv,
    fold_scale_into_matmul, fold_transposes_into_nchwc_reorders, fuse_attention, fuse_channels_last_depthwise,
    fuse_elementwise_chain, fuse_epilogue, fuse_layernorm, share_strided_subsample, subsample_into_producer,
    hoist_matmul_reshape, merge_qkv_projections, merge_transposes_across_unit_reshape,
    per_channel_affine_to_depthwise_conv,
    sink_transposes_below_elementwise, to_inverted_residual, to_nchwc_layout, to_winograd_conv,
)
