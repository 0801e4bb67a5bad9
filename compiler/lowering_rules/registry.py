"""Lowering rules by ONNX op type (default domain, or `domain::Op` for the compiler's internal
ops, e.g. "ai.tfpopef::FusedConv"). A rule is `(NodeContext) -> KernelCall`; adding an op = one
rule function with @lowering_rule("Op") in a module listed by compiler/lowering_rules/__init__.py.
This module imports no rule: the rules import it."""
from typing import Callable, Dict, List

import onnx

from compiler.errors import UnsupportedOpError
from compiler.lowering_rules.node_context import KernelCall, NodeContext

Rule = Callable[[NodeContext], KernelCall]
_RULES: Dict[str, Rule] = {}

# Lowered by compiler/lowering/control_flow.py into sub-programs, not by a rule.
CONTROL_FLOW_OPS = ("If", "Loop")


def lowering_rule(*op_types: str):
    def decorate(fn: Rule) -> Rule:
        for op in op_types:
            if op in _RULES:
                raise ValueError(f"lowering rule for '{op}' registered twice")
            _RULES[op] = fn
        return fn
    return decorate


def supported_ops() -> List[str]:
    """The ONNX ops a model may contain (the internal `domain::Op` ones are written by passes)."""
    return sorted(op for op in _RULES if "::" not in op)


def is_control_flow(node: onnx.NodeProto) -> bool:
    return node.op_type in CONTROL_FLOW_OPS and node.domain in ("", "ai.onnx")


def find_rule(node: onnx.NodeProto, model_name: str = "<model>") -> Rule:
    op = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"
    if op in _RULES:
        return _RULES[op]
    raise UnsupportedOpError(f"{model_name}: unsupported op '{op}' (node '{node.name}'); the emulator supports "
                             f"{', '.join(supported_ops())}")
