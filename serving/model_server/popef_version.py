"""Recognises and loads a bare-PopEF model version: a numbered directory holding a `.popef`
and no SavedModel, with the model's optional Triton `config.pbtxt` one level up. Paths go
through tf.io.gfile; a version on a non-local file system is served from a local copy."""
import posixpath

from serving.model_server.popef_servable import PopefServable
from serving.model_server.staging import LocalVersion
from serving.model_server.triton_model_config import (CONFIG_FILE, check_against,
                                                      read_model_config, run_options)
from serving.model_server.version_source import MODEL_FILES, join


def is_bare_popef(directory: str) -> bool:
    import tensorflow as tf
    if any(tf.io.gfile.exists(join(directory, name)) for name in MODEL_FILES):
        return False
    return bool(tf.io.gfile.glob(join(directory, "*.popef")))


def load_bare_popef(name: str, version: int, path: str) -> PopefServable:
    model_dir = posixpath.dirname(path.rstrip("/"))
    config_path = join(model_dir, CONFIG_FILE)
    config = read_model_config(model_dir)
    local = LocalVersion(path)
    try:
        servable = PopefServable(name, version, local.path, run_options(config, config_path),
                                 local_copy=local)
        servable.load()
        check_against(config, servable, config_path)
    except BaseException:
        local.remove()
        raise
    return servable
