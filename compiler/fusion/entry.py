"""One model of a fusion: PopRT's `model_fusion` YAML entry as a Python object.

Per-model settings left as None fall back to the CompilerOptions given to fuse_models
(batch_size, batch_axis, max_tensor_size); `name` defaults to "graph{i}". Every check here
names the entry (`model_fusion[i]`, prefixed by the YAML file when the entry came from one).
"""
import dataclasses
import os
import re
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Union

import onnx

from compiler.cli_config import FUSION_ENTRY_KEYS, parse_input_shapes
from compiler.converter.context import PRECISIONS
from compiler.errors import ConfigError
from compiler.frontends import is_tensorflow_model
from compiler.frontends.model_loading import ModelSource

# Later a subgraph's name becomes a SavedModel signature name, so keep it to a safe alphabet.
_NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]*$")

ShapeSpec = Union[Dict[str, Sequence[int]], Sequence[str], str, None]


@dataclasses.dataclass
class FusionEntry:
    input_model: ModelSource                 # ONNX file, bytes, ModelProto, SavedModel folder or .keras file
    input_shape: ShapeSpec = None            # {"X": [1, 2]} or ["X=1,2", ...]
    precision: str = "fp32"                  # "fp32" or "fp16"
    batch_size: Optional[int] = None         # None: CompilerOptions.batch_size, else the inputs' dims
    batch_axis: Optional[int] = None         # None: CompilerOptions.batch_axis
    max_tensor_size: Optional[int] = None    # None: CompilerOptions.max_tensor_size
    convert_version: Optional[int] = None    # convert the model to this opset first (TF models: export to it)
    signature_name: Optional[str] = None     # TF SavedModel signature to export (default serving_default)
    passes: Optional[List[str]] = None       # run only these converter passes
    skip_passes: Optional[List[str]] = None  # converter passes not to run
    name: Optional[str] = None               # subgraph name; default "graph{i}"
    where: Optional[str] = None              # label for messages; default "model_fusion[i]"

    def source_label(self) -> str:
        """How messages and the fusion map name the model."""
        source = self.input_model
        if isinstance(source, (str, os.PathLike)):
            return os.fspath(source)
        if isinstance(source, onnx.ModelProto):
            return f"<model '{source.graph.name}'>" if source.graph.name else "<model>"
        return "<model bytes>"


def _from_mapping(raw: Mapping, where: str) -> FusionEntry:
    unknown = [k for k in raw if k not in FUSION_ENTRY_KEYS and k != "where"]
    if unknown:
        raise ConfigError(f"{where}: unknown key '{unknown[0]}'; valid keys of a model_fusion entry: "
                          f"{', '.join(FUSION_ENTRY_KEYS)}")
    return FusionEntry(**{"input_model": None, **raw})  # a missing input_model is reported by _check_entry


def _check_entry(entry: FusionEntry, index: int) -> FusionEntry:
    where = entry.where
    if entry.input_model is None:
        raise ConfigError(f"{where}: input_model is required")
    if isinstance(entry.input_model, (str, os.PathLike)):
        path = os.fspath(entry.input_model)
        if not (os.path.isfile(path) or is_tensorflow_model(path)):
            raise ConfigError(f"{where}: input_model '{path}' "
                              f"{'not found' if not os.path.exists(path) else 'is not a file'}")
    elif not isinstance(entry.input_model, (bytes, bytearray, memoryview, onnx.ModelProto)):
        raise ConfigError(f"{where}: input_model must be an ONNX file path, serialized model bytes or a "
                          f"ModelProto, got {type(entry.input_model).__name__}")
    if entry.precision not in PRECISIONS:
        raise ConfigError(f"{where}: precision {entry.precision!r} is not one of {', '.join(PRECISIONS)}")
    shapes = entry.input_shape
    if shapes is None:
        entry.input_shape = {}
    elif isinstance(shapes, (str, list, tuple)):
        items = shapes.split() if isinstance(shapes, str) else list(shapes)
        if not all(isinstance(i, str) for i in items):
            raise ConfigError(f"{where}: input_shape must be a mapping NAME -> dims or a list of 'NAME=d0,d1' "
                              f"strings, got {shapes!r}")
        try:
            entry.input_shape = parse_input_shapes(items, "input_shape")
        except ConfigError as e:
            raise ConfigError(f"{where}: {e}") from None
    elif isinstance(shapes, Mapping):
        entry.input_shape = {str(k): list(v) if isinstance(v, (list, tuple)) else v for k, v in shapes.items()}
    else:
        raise ConfigError(f"{where}: input_shape must be a mapping NAME -> dims or a list of 'NAME=d0,d1' strings, "
                          f"got {shapes!r}")
    if entry.name is None:
        entry.name = f"graph{index}"
    elif not isinstance(entry.name, str) or not _NAME_RE.match(entry.name):
        raise ConfigError(f"{where}: name {entry.name!r} is not a valid subgraph name (letters, digits, '_', '.', '-'; "
                          f"not starting with '.' or '-')")
    return entry


def normalize_entries(entries: Iterable[Union[FusionEntry, Mapping]]) -> List[FusionEntry]:
    """Copies of the entries with defaults filled and every check done (names unique)."""
    if isinstance(entries, (Mapping, FusionEntry, str, bytes)) or not isinstance(entries, Iterable):
        raise ConfigError(f"model_fusion must be a list of models, got {type(entries).__name__}")
    entries = list(entries)
    if not entries:
        raise ConfigError("model_fusion is empty: list at least one model to fuse")
    checked: List[FusionEntry] = []
    defaulted = set()  # entries named graph{i} by default, for the duplicate-name message
    for i, raw in enumerate(entries):
        default_where = f"model_fusion[{i}]"
        if isinstance(raw, FusionEntry):
            entry = dataclasses.replace(raw)
        elif isinstance(raw, Mapping):
            entry = _from_mapping(raw, raw.get("where") or default_where)
        else:
            raise ConfigError(f"{default_where}: expected a FusionEntry or a mapping of settings, "
                              f"got {type(raw).__name__}")
        entry.where = entry.where or default_where
        if entry.name is None:
            defaulted.add(i)
        checked.append(_check_entry(entry, i))
    owner: Dict[str, int] = {}
    for i, entry in enumerate(checked):
        first = owner.setdefault(entry.name, i)
        if first != i:
            mine = " (its default name)" if i in defaulted else ""
            theirs = " (its default name)" if first in defaulted else ""
            raise ConfigError(f"{entry.where}: name '{entry.name}'{mine} is already the name of "
                              f"model_fusion[{first}]{theirs}; subgraph names must be unique")
    return checked
