"""Helpers shared by the converter passes and the lowering: tensor types, constants, graph edits,
topological order and model loading."""
