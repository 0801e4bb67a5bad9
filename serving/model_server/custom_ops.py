"""Custom-op libraries loaded before any model (what stock tensorflow_model_server can only
get through a Bazel rebuild): the PopefExecute op of this project always, plus
`--custom_op_paths`."""
import logging
import os
from typing import List

log = logging.getLogger("popef_model_server")


def load_custom_ops(custom_op_paths: str) -> List[str]:
    """Loads every library; returns the paths loaded. A library that fails to load stops the
    server (its models could not load anyway)."""
    import tensorflow as tf
    loaded = []
    popef_path = _popef_op_path()
    if popef_path is not None:
        import tf_popef_op
        tf_popef_op.load_op_library()
        loaded.append(popef_path)
    else:
        log.warning("The PopefExecute op library is not built (run `make build`); SavedModels "
                    "exported from PopEF files will fail to load.")
    for path in filter(None, custom_op_paths.split(":")):
        if os.path.abspath(path) in loaded:
            continue
        try:
            tf.load_op_library(path)
        except tf.errors.NotFoundError as error:
            raise RuntimeError(f"--custom_op_paths: cannot load {path}: {error.message}") from None
        loaded.append(os.path.abspath(path))
    for path in loaded:
        log.info("Loaded custom op library %s", path)
    return loaded


def _popef_op_path():
    try:
        import tf_popef_op
        path = tf_popef_op.op_library_path()
    except (ImportError, AttributeError):
        return None
    return path if os.path.exists(path) else None
