"""End-to-end fusion tests: compile with compiler.fusion, run on the emulator runtime, compare
each subgraph with onnxruntime on its original model. The model builders live with the
compiler's fusion tests."""
import os
import sys

_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (os.path.join(_TESTS, "compiler"), os.path.join(_TESTS, "compiler", "fusion")):
    if path not in sys.path:
        sys.path.insert(0, path)
