"""Registry of converter passes. A pass is a function (or a class whose instances are called)
`(model, ctx) -> model`, registered with a name, a kind and whether one run reaches a fixed
point; its docstring's first line is its description (shown by --list_all_passes). This module
imports no pass: the pass modules import it, and the packages that hold them
(compiler/converter/passes, compiler/kernel_fusion/passes) list them."""
import dataclasses
from typing import Any, Callable, Dict, List

import onnx

from compiler.errors import UnknownPassError

PassFn = Callable[[onnx.ModelProto, Any], onnx.ModelProto]  # (model, PassContext) -> model

KINDS = ("shape", "fold", "eliminate", "fuse", "precision", "order", "check")


@dataclasses.dataclass(frozen=True)
class PassInfo:
    name: str
    kind: str
    idempotent: bool  # False: the pipeline repeats it until the graph stops changing
    description: str
    run: PassFn


_PASSES: Dict[str, PassInfo] = {}


def register(name: str, kind: str, idempotent: bool = True):
    if kind not in KINDS:
        raise ValueError(f"pass '{name}': kind must be one of {KINDS}, got '{kind}'")

    def decorate(obj):
        if name in _PASSES:
            raise ValueError(f"pass '{name}' is registered twice")
        fn = obj() if isinstance(obj, type) else obj
        doc = (obj.__doc__ or "").strip().splitlines()
        _PASSES[name] = PassInfo(name, kind, idempotent, doc[0] if doc else "", fn)
        return obj

    return decorate


def get_pass(name: str) -> PassInfo:
    if name not in _PASSES:
        raise UnknownPassError(f"unknown pass '{name}'; known passes: {', '.join(sorted(_PASSES))}")
    return _PASSES[name]


def list_all_passes() -> List[PassInfo]:
    """Every registered pass, sorted by name."""
    return [_PASSES[n] for n in sorted(_PASSES)]
