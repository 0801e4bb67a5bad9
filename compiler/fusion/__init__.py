"""Model fusion: several ONNX models compiled into one executable, each a subgraph selected at
run time by the `index` input (PopRT's model_fusion)."""
from compiler.fusion.anchor_names import INDEX_ANCHOR
from compiler.fusion.entry import FusionEntry
from compiler.fusion.fuse import FusedModel, fuse_models, lower_fused
from compiler.fusion.fusion_map import FUSION_OPAQUE

__all__ = ["FUSION_OPAQUE", "INDEX_ANCHOR", "FusedModel", "FusionEntry", "fuse_models", "lower_fused"]
