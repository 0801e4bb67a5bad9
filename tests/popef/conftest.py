"""The popef package's tests compile their sample files with the compiler; its test helpers live
with the compiler's tests."""
import os
import sys

_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (os.path.dirname(_TESTS), os.path.join(_TESTS, "compiler")):
    if path not in sys.path:
        sys.path.insert(0, path)
