"""Lowering: converted ONNX -> kernel steps (rules), static schedule, static memory plan,
weight store, device memory check and PopEF emission."""
from compiler.lowering.lower_model import LoweredModel, lower_model

__all__ = ["LoweredModel", "lower_model"]
