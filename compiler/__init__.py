"""tf-popef compiler: ONNX -> converter passes -> lowering -> PopEF (PopRT-compatible API)."""
from compiler.compiler import Compiler
from compiler.executable import Executable
from compiler.options import CompilerOptions
from compiler.version import VERSION as __version__

__all__ = ["Compiler", "CompilerOptions", "Executable", "__version__"]
