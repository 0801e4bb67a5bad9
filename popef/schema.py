"""The JSON layout of the Metadata and Executable blobs as far as the Python tools read them
(reader.tensor_data, popef_dump): each listed key may be absent, but when present it must have
this type. A file that breaks it raises PopefError naming the JSON path, so no tool meets a list
where it expects an object. (The runtime's C++ parser checks the full, stricter schema.)"""
from typing import Any

from popef.format import PopefError

INT, STR, ANY = "int", "str", "any"


def _list(item):
    return ("list", item)


def _map(value):
    return ("map", value)


SHAPE = _list(INT)
NAMES = _list(STR)
ANCHOR = {"name": STR, "dtype": STR, "shape": SHAPE, "direction": STR, "batch_axis": ANY, "aliases": NAMES}
TENSOR_DATA_ENTRY = {"name": STR, "dtype": STR, "shape": SHAPE, "nbytes": INT}
METADATA = {"anchors": _list(ANCHOR), "tensor_data": _list(TENSOR_DATA_ENTRY), "program_flow": _map(NAMES),
            "device_memory": _map(INT)}
STEP = {"inputs": _list(INT), "outputs": _list(INT), "attrs": _map(ANY), "tensor_data": STR, "offset": INT,
        "nbytes": INT, "cases": NAMES, "in_place_input": INT}
TENSOR = {"id": INT, "name": STR, "shape": SHAPE}
SUBGRAPH = {"inputs": NAMES, "outputs": NAMES}
EXECUTABLE = {"tensors": _list(TENSOR), "programs": _map(_list(STEP)), "subgraphs": _list(SUBGRAPH)}


def _type_name(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number")


def _check(value: Any, spec, path: str) -> None:
    if spec == ANY:
        return
    if spec == INT:
        ok = isinstance(value, int) and not isinstance(value, bool)
        expected = "an integer"
    elif spec == STR:
        ok, expected = isinstance(value, str), "a string"
    elif isinstance(spec, tuple) and spec[0] == "list":
        ok, expected = isinstance(value, list), "a list"
        if ok:
            for i, item in enumerate(value):
                _check(item, spec[1], f"{path}[{i}]")
    elif isinstance(spec, tuple) and spec[0] == "map":
        ok, expected = isinstance(value, dict), "an object"
        if ok:
            for key, item in value.items():
                _check(item, spec[1], f"{path}.{key}")
    else:
        ok, expected = isinstance(value, dict), "an object"
        if ok:
            for key, sub in spec.items():
                if key in value:
                    _check(value[key], sub, f"{path}.{key}")
    if not ok:
        raise PopefError(f"{path}: expected {expected}, got {_type_name(value)}")


def check_metadata(doc: Any, where: str) -> None:
    _check(doc, METADATA, where)


def check_executable(doc: Any, where: str) -> None:
    _check(doc, EXECUTABLE, where)
