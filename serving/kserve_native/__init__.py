"""The native (C++) KServe v2 gRPC front end: `_kserve_native`, built by setup.py from this
folder's CMakeLists.txt. serving/model_server/kserve_native.py drives it.

Import it with `load()`. TensorFlow loads its framework library into the process's global
symbol scope, and that library exports its own build of protobuf: a module linking Debian's
libprotobuf and libgrpc++ the ordinary way binds their protobuf calls to TensorFlow's copy and
crashes on the first message it parses. RTLD_DEEPBIND makes the module and the libraries it
brings look up their own dependencies first, so each side keeps its protobuf.
"""
import os
import sys
import threading

_lock = threading.Lock()


def load():
    """The `_kserve_native` extension module, loaded with RTLD_DEEPBIND."""
    with _lock:
        flags = sys.getdlopenflags()
        sys.setdlopenflags(flags | os.RTLD_DEEPBIND)
        try:
            from serving.kserve_native import _kserve_native
        finally:
            sys.setdlopenflags(flags)
    return _kserve_native
