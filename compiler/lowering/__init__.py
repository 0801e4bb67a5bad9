"""Lowering: ONNX after kernel fusion -> kernel steps (by compiler/lowering_rules), static
schedule, static memory plan, weight store and device memory check."""
from compiler.lowering.lower_model import LoweredModel, lower_model

__all__ = ["LoweredModel", "lower_model"]
