"""Makes the repository importable without installing it and exposes compiler_test_helpers to
the tests in every sub-folder."""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_REPO = os.path.dirname(os.path.dirname(_HERE))
for path in (_REPO, _HERE):
    if path not in sys.path:
        sys.path.insert(0, path)
