"""Every kernel fusion pass module; importing this package registers them in the converter's pass
registry (so --passes / --list_all_passes know them). The pipeline order is in
compiler/kernel_fusion/pipeline.py."""
from compiler.kernel_fusion.passes import (  # noqa: F401
    fold_scale_into_matmul, fuse_elementwise_chain, fuse_epilogue, fuse_layernorm, hoist_matmul_reshape,
    merge_transposes_across_unit_reshape, to_inverted_residual, to_nchwc_layout, to_winograd_conv,
)
