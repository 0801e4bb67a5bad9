"""The CLI's settings: PopRT's flag names, their defaults, and reading/merging them from a YAML
file (keys = flag names without `--`; command-line flags override YAML).

A YAML file either describes one model, or lists several under `model_fusion` (PopRT's model
fusion): then the top-level keys are global, an entry's own keys override them for that model,
and FUSION_ENTRY_KEYS are the keys an entry may set.
"""
import os
import re
from typing import Any, Dict, List

import yaml

from compiler.errors import ConfigError
from compiler.frontends import is_tensorflow_model

_SHAPE_RE = re.compile(r"^\s*([^=\s]+)\s*=\s*(\d+(?:\s*,\s*\d+)*)?\s*$")


def parse_input_shapes(items: List[str], where: str = "--input_shape") -> Dict[str, List[int]]:
    """['X=1,2', 'Y=3'] -> {'X': [1, 2], 'Y': [3]} ("X=" is a scalar)."""
    shapes: Dict[str, List[int]] = {}
    for item in items:
        match = _SHAPE_RE.match(str(item))
        if not match:
            raise ConfigError(f"bad {where} '{item}': expected NAME=d0,d1,... (e.g. X=4,2)")
        name, dims = match.group(1), match.group(2)
        if name in shapes:
            raise ConfigError(f"{where} gives input '{name}' twice")
        shapes[name] = [int(d) for d in dims.split(",")] if dims else []
    return shapes


def _shape_items(value, where) -> List[str]:
    if isinstance(value, str):
        return value.split()
    if isinstance(value, dict):  # {X: [1, 2]} or {X: "1,2"}
        items = []
        for name, dims in value.items():
            if isinstance(dims, (list, tuple)) and all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
                items.append(f"{name}=" + ",".join(str(d) for d in dims))
            elif isinstance(dims, str):
                items.append(f"{name}={dims}")
            else:
                raise ConfigError(f"{where}: input_shape for '{name}' must be a list of integers, got {dims!r}")
        return items
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ConfigError(f"{where}: input_shape must be a list of 'NAME=d0,d1,...' strings, got {value!r}")


def _names(value, where, key) -> List[str]:
    if isinstance(value, str):
        return [n.strip() for n in value.split(",") if n.strip()]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return [n.strip() for v in value for n in v.split(",") if n.strip()]
    raise ConfigError(f"{where}: {key} must be a comma-separated string or a list of pass names, got {value!r}")


def _int(value, where, key, minimum=None):
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}: {key} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ConfigError(f"{where}: {key} must be >= {minimum}, got {value}")
    return value


def _choice(*allowed):
    def check(value, where, key):
        if value not in allowed:
            raise ConfigError(f"{where}: {key} must be one of {', '.join(allowed)}, got {value!r}")
        return value
    return check


def _bool(value, where, key):
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: {key} must be true or false, got {value!r}")
    return value


def _str(value, where, key):
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: {key} must be a non-empty string, got {value!r}")
    return value


def _fusion_entries(value, where, key) -> List[Dict[str, Any]]:
    """The model_fusion list of the YAML file `where`: one dict of normalized settings per entry,
    input_model resolved against the file's folder, plus "where" = the entry's label."""
    if not isinstance(value, list):
        raise ConfigError(f"{where}: {key} must be a list of models (each a mapping with input_model, input_shape, "
                          f"precision...), got {type(value).__name__}")
    if not value:
        raise ConfigError(f"{where}: {key} is empty: list at least one model to fuse")
    folder = os.path.dirname(os.path.abspath(where))
    entries = []
    for i, raw in enumerate(value):
        label = f"{where}: {key}[{i}]"
        if not isinstance(raw, dict):
            raise ConfigError(f"{label}: expected a mapping of settings (input_model: ..., input_shape: ...), "
                              f"got {raw!r}")
        entry: Dict[str, Any] = {"where": label}
        for k, v in raw.items():
            if k not in FUSION_ENTRY_KEYS:
                if k in SETTINGS:
                    raise ConfigError(f"{label}: {k} applies to the whole fused executable; set it at the top level "
                                      f"of the file, not in a model_fusion entry")
                raise ConfigError(f"{label}: unknown key '{k}'; valid keys of a model_fusion entry: "
                                  f"{', '.join(FUSION_ENTRY_KEYS)}")
            if k == "name":
                v = _str(v, label, k)
            elif k == "input_shape":
                try:  # message "<entry>: bad input_shape 'X:1': ..." instead of the flag's wording
                    v = parse_input_shapes(_shape_items(v, label), "input_shape")
                except ConfigError as e:
                    raise ConfigError(f"{label}: {e}" if not str(e).startswith(label) else str(e)) from None
            else:
                v = normalize(k, v, label)
            if k == "input_model":
                path = v if os.path.isabs(v) else os.path.normpath(os.path.join(folder, v))
                if not (os.path.isfile(path) or is_tensorflow_model(path)):
                    raise ConfigError(f"{label}: input_model '{v}' not found (looked for {path}; expected an ONNX "
                                      f"file, a TensorFlow SavedModel folder or a .keras file)")
                v = path
            entry[k] = v
        if "input_model" not in entry:
            raise ConfigError(f"{label}: input_model is required")
        entries.append(entry)
    return entries


# key -> (default, normalizer(value, where, key)); the YAML keys and the flag names.
SETTINGS: Dict[str, Any] = {
    "input_model": (None, _str),
    "input_shape": ({}, lambda v, w, k: parse_input_shapes(_shape_items(v, w), f"{w}: input_shape")),
    "precision": ("fp32", _choice("fp32", "fp16")),
    "output_dir": ("./", _str),
    "output_model": ("executable", _str),
    "export_popef": (False, _bool),
    "max_tensor_size": (-1, lambda v, w, k: _int(v, w, k, minimum=-1)),
    "ipu_version": ("ipu2", _choice("ipu2", "ipu21")),
    "batch_size": (None, lambda v, w, k: None if v is None else _int(v, w, k, minimum=1)),
    "batch_axis": (0, lambda v, w, k: _int(v, w, k, minimum=0)),
    "convert_version": (None, lambda v, w, k: None if v is None else _int(v, w, k, minimum=1)),
    "signature_name": (None, lambda v, w, k: None if v is None else _str(v, w, k)),
    "passes": ([], _names),
    "skip_passes": ([], _names),
    "run": (False, _bool),
    "model_fusion": (None, _fusion_entries),  # YAML only: None = one model
}
PATH_KEYS = ("input_model", "output_dir")
FUSION_ENTRY_KEYS = ("input_model", "input_shape", "precision", "batch_size", "batch_axis", "max_tensor_size",
                     "convert_version", "signature_name", "passes", "skip_passes", "name")


def defaults() -> Dict[str, Any]:
    return {key: (dict(d) if isinstance(d, dict) else list(d) if isinstance(d, list) else d)
            for key, (d, _) in SETTINGS.items()}


def normalize(key: str, value, where: str):
    return SETTINGS[key][1](value, where, key)


def read_yaml(path: str) -> Dict[str, Any]:
    """Settings from a YAML file, paths resolved against the file's folder."""
    if not os.path.isfile(path):
        raise ConfigError(f"{path}: config file not found")
    try:
        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not valid YAML: not UTF-8 text ({e})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings at the top level, got {type(data).__name__}")
    if "model_fusion" in data:
        if "input_model" in data:
            raise ConfigError(f"{path}: input_model is given at the top level and model_fusion lists the models to "
                              f"fuse; put input_model in each model_fusion entry instead")
        if data.get("export_popef") is False:
            raise ConfigError(f"{path}: export_popef is false, but model fusion produces only a PopEF file; set "
                              f"export_popef: true (or leave it out)")
    settings = {}
    folder = os.path.dirname(os.path.abspath(path))
    for key, value in data.items():
        if key not in SETTINGS:
            raise ConfigError(f"{path}: unknown key '{key}'; valid keys: {', '.join(SETTINGS)}")
        value = normalize(key, value, path)
        if key in PATH_KEYS and value is not None and not os.path.isabs(value):
            value = os.path.normpath(os.path.join(folder, value))
        settings[key] = value
    return settings
