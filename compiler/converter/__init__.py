"""ONNX -> optimized ONNX: the pass registry, the default pipeline and PopRT's Converter."""
from compiler.converter import passes  # noqa: F401  (registers the passes)
from compiler.converter.converter import Converter
from compiler.converter.pass_registry import PassInfo, get_pass, list_all_passes, register
from compiler.converter.pipeline import DEFAULT_PIPELINE

__all__ = ["Converter", "PassInfo", "get_pass", "list_all_passes", "register", "DEFAULT_PIPELINE"]
