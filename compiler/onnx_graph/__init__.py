"""Helpers shared by the converter passes and the lowering: tensor types, constants, graph edits,
topological order, the internal op schemas and the activation table."""
