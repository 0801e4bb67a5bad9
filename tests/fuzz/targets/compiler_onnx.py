"""Fuzz target: Compiler.compile on ONNX models. The model is written to a file in a scratch folder
and compiled from its path, so initializers with external data are resolved against that folder
(paths leaving it must be refused). Any outcome other than an executable or a CompileError
(MemoryError, RecursionError, a numpy or onnx exception, a crash or a hang) is a finding."""
import os
import tempfile

from compiler import Compiler
from compiler.errors import CompileError

import seeds

_folder = None


def _scratch() -> str:
    global _folder
    if _folder is None:
        _folder = tempfile.mkdtemp(prefix="fuzz_compiler_")
        with open(os.path.join(_folder, "w.bin"), "wb") as f:
            f.write(bytes(range(256)) * 4)
    return _folder


def check(data: bytes) -> None:
    path = os.path.join(_scratch(), "model", "model.onnx")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    try:
        Compiler.compile(path)
    except CompileError:
        pass


def seed_inputs():
    return [m.SerializeToString() for m in seeds.onnx_seeds().values()]
