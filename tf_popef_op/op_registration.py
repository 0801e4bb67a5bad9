"""Registers the PopefExecute op when TensorFlow is imported, as TensorFlow add-on packages do:
`import tf_popef_op` before loading a SavedModel that uses the op is all a user writes.

`import tf_popef_op.runtime` imports this package first, and the runtime must never pull in
TensorFlow, so the package cannot simply `import tensorflow` itself. Instead:
- TensorFlow already imported: the op library is loaded at once;
- otherwise a `sys.meta_path` finder waits for `import tensorflow`: it wraps that module's own
  loader and loads the op library right after TensorFlow's `__init__` has run, then removes
  itself. A process that never imports TensorFlow never loads the op library.
A library that cannot be loaded (not built, built against another TensorFlow) gives a warning,
never a failed `import tensorflow`; `tf_popef_op.load_op_library()` raises the full error.
"""
import importlib.util
import sys
import threading
import warnings

TENSORFLOW = "tensorflow"

_lock = threading.Lock()


def register_when_tensorflow_imports() -> None:
    """Loads the op library now if TensorFlow is imported, else once it is."""
    module = sys.modules.get(TENSORFLOW)
    if module is None:
        with _lock:
            if not any(isinstance(f, _TensorFlowImportHook) for f in sys.meta_path):
                sys.meta_path.insert(0, _TensorFlowImportHook())
    elif not getattr(getattr(module, "__spec__", None), "_initializing", False):
        _register()
    # else: TensorFlow is still running its own __init__ (it imported this package itself);
    # loading the library now would see a half-built module, so the op loads on first use.


def _register() -> None:
    from tf_popef_op import ops
    try:
        ops.load_op_library()
    except Exception as error:  # noqa: BLE001  (a broken library must not fail `import tensorflow`)
        warnings.warn(f"tf_popef_op: the PopefExecute op is not registered: {error}. "
                      f"{ops.REGISTRATION_HINT}", RuntimeWarning, stacklevel=3)


class _RegisterAfterExec:
    """TensorFlow's own loader, plus op registration after the module has executed."""

    def __init__(self, loader, hook):
        self._loader = loader
        self._hook = hook

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        # The module keeps TensorFlow's loader: introspection (resources, source) is unchanged.
        module.__loader__ = self._loader
        module.__spec__.loader = self._loader
        self._loader.exec_module(module)
        self._hook.remove()
        _register()

    def __getattr__(self, name):
        return getattr(self._loader, name)


class _TensorFlowImportHook:
    """A meta-path finder that only answers for the top-level `tensorflow` package: it asks the
    other finders for TensorFlow's spec and wraps the loader (see _RegisterAfterExec)."""

    def __init__(self):
        self._searching = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != TENSORFLOW or self._searching:
            return None
        self._searching = True
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self._searching = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _RegisterAfterExec(spec.loader, self)
        return spec

    def remove(self) -> None:
        with _lock:
            if self in sys.meta_path:
                sys.meta_path.remove(self)
