"""Recognises and loads a bare-PopEF model version: a numbered directory holding a `.popef`
and no SavedModel, with the model's optional Triton `config.pbtxt` one level up."""
import glob
import os

from serving.model_server.popef_servable import PopefServable
from serving.model_server.triton_model_config import (CONFIG_FILE, check_against,
                                                      read_model_config, run_options)


def is_bare_popef(directory: str) -> bool:
    if os.path.isfile(os.path.join(directory, "saved_model.pb")) or os.path.isfile(
            os.path.join(directory, "saved_model.pbtxt")):
        return False
    return bool(glob.glob(os.path.join(glob.escape(directory), "*.popef")))


def load_bare_popef(name: str, version: int, path: str) -> PopefServable:
    model_dir = os.path.dirname(os.path.abspath(path))
    config_path = os.path.join(model_dir, CONFIG_FILE)
    config = read_model_config(model_dir)
    servable = PopefServable(name, version, path, run_options(config, config_path))
    servable.load()
    check_against(config, servable, config_path)
    return servable
