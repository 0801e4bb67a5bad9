"""Which ONNX backend node cases the project claims: every case of every op the emulator
lowers (the op's own cases, `test_<op>_*`, whose model is that single node), plus the
`_expanded` variants made only of claimed ops (a function body such as Softmax's ReduceMax,
Sub, Exp... exercises the same kernels), including If, Loop and Scan. LSTM and GRU are part
B's and have their own tests.
"""
import functools
from typing import Dict, List

import onnx
from onnx.backend.test.loader import load_model_tests

from compiler.lowering_rules.registry import supported_ops

# Lowered by rules but checked elsewhere (tests/compiler/lowering/test_recurrent_ops.py,
# tests/compiler/converter/passes/test_decompose_einsum.py).
NOT_CLAIMED_HERE = {"LSTM", "GRU", "Einsum"}
# Control flow has no lowering rule: the converter unrolls Scan and static Loop/If, the lowering
# turns run-time If/Loop into If/Loop steps (compiler/lowering/control_flow.py).
CONTROL_FLOW = {"If", "Loop", "Scan"}
# Always folded into initializers by constant_folding, so allowed inside expanded cases.
FOLDED = {"Constant"}


def claimed_ops() -> List[str]:
    return sorted((set(supported_ops()) | CONTROL_FLOW) - NOT_CLAIMED_HERE)


def _op_types(model: onnx.ModelProto) -> set:
    return {n.op_type for n in model.graph.node}


@functools.lru_cache(maxsize=1)
def claimed_cases() -> Dict[str, object]:
    """name -> onnx TestCase, in the suite's order."""
    ops = set(claimed_ops())
    selected = {}
    for case in load_model_tests(kind="node"):
        types = _op_types(case.model)
        if "_expanded" in case.name:
            keep = types <= ops | FOLDED
        else:
            keep = len(case.model.graph.node) == 1 and case.model.graph.node[0].op_type in ops
        if keep:
            selected[case.name] = case
    return selected


def op_of_case(case) -> str:
    """The op a case belongs to: its single node's op, or for an expanded case the op whose
    function body it is (the longest op name, in snake case, that prefixes the case name)."""
    if "_expanded" not in case.name:
        return case.model.graph.node[0].op_type
    body = case.name[len("test_"):]
    names = _snake_case_ops()
    best = max((s for s in names if body == s or body.startswith(s + "_")), key=len, default=None)
    return names[best] if best else body.split("_expanded")[0]


@functools.lru_cache(maxsize=1)
def _snake_case_ops() -> Dict[str, str]:
    import re

    import onnx.defs
    names = {}
    for schema in onnx.defs.get_all_schemas():
        names[re.sub(r"(?<!^)(?=[A-Z])", "_", schema.name).lower()] = schema.name
        names[schema.name.lower()] = schema.name
    names.update({"sce": "SoftmaxCrossEntropyLoss", "batchnorm": "BatchNormalization", "layer_normalization":
                  "LayerNormalization", "logsoftmax": "LogSoftmax"})
    return names
