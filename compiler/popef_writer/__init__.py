"""The last compile stage: lowered programs, arena plans and weights -> the PopEF Metadata,
Executable JSON and blobs, written with the popef package."""
from compiler.popef_writer.popef_emitter import EmittedPopef, IndexAnchor, emit_popef, fused_program_name

__all__ = ["EmittedPopef", "IndexAnchor", "emit_popef", "fused_program_name"]
