"""Architecture tests build small Keras networks offline (weights=None, nothing is downloaded) and
compare the compiled model, run on the emulator, with TensorFlow's output; the repository root and
this folder (architecture_checks, keras_architectures) are importable."""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
_HERE = os.path.dirname(os.path.abspath(__file__))
for path in (os.path.dirname(os.path.dirname(_HERE)), _HERE):
    if path not in sys.path:
        sys.path.insert(0, path)
