"""Runs every claimed ONNX node case through PopefBackend and prints the counts that
docs/conformance.md records: per op, passed / expected failures / unexpected failures, over all
claimed cases and over those whose tensors are all float32/float16/integer/bool (the dtypes the
coverage target counts; float64 and the exotic types are counted in the first total only).

    .venv/bin/python tests/conformance/conformance_report.py [--markdown]
"""
import collections
import os
import sys
import time
import warnings

import numpy as np
import onnx
from onnx.backend.test.runner import Runner, _normalize_tensor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from claimed_cases import claimed_cases, op_of_case  # noqa: E402
from expected_failures import EXPECTED_FAILURES  # noqa: E402
from popef_backend import PopefBackend  # noqa: E402

TARGET_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BOOL, onnx.TensorProto.INT8,
                onnx.TensorProto.INT16, onnx.TensorProto.INT32, onnx.TensorProto.INT64, onnx.TensorProto.UINT8,
                onnx.TensorProto.UINT16, onnx.TensorProto.UINT32, onnx.TensorProto.UINT64}


def in_target_types(model: onnx.ModelProto) -> bool:
    values = list(model.graph.input) + list(model.graph.output)
    return all(v.type.HasField("tensor_type") and v.type.tensor_type.elem_type in TARGET_TYPES for v in values)


def run_case(case) -> str:
    try:
        rep = PopefBackend.prepare(case.model)
        for inputs, refs in case.data_sets:
            outputs = rep.run([_normalize_tensor(x) for x in inputs])
            Runner.assert_similar_outputs([_normalize_tensor(r) for r in refs], list(outputs), rtol=case.rtol,
                                          atol=case.atol, model_dir=None)
        return "passed"
    except Exception:  # noqa: BLE001 - every failure is counted, expected or not
        return "xfail" if case.name in EXPECTED_FAILURES else "failed"


def main(markdown: bool) -> int:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = claimed_cases()
        start = time.time()
        results = {name: run_case(case) for name, case in cases.items()}
        elapsed = time.time() - start
    per_op = collections.defaultdict(collections.Counter)
    totals = {"all": collections.Counter(), "target": collections.Counter(), "own": collections.Counter(),
              "own_target": collections.Counter()}
    for name, outcome in results.items():
        case = cases[name]
        per_op[op_of_case(case)][outcome] += 1
        totals["all"][outcome] += 1
        target, own = in_target_types(case.model), "_expanded" not in name
        totals["target"][outcome] += target
        totals["own"][outcome] += own
        totals["own_target"][outcome] += own and target
    labels = {"all": "all claimed cases", "target": "  with float32/float16/integer/bool tensors",
              "own": "the ops' own cases (no _expanded)", "own_target": "  with float32/float16/integer/bool tensors"}
    for label, c in totals.items():
        n = sum(c.values())
        print(f"{labels[label]}: {n} cases, {c['passed']} passed ({100.0 * c['passed'] / n:.1f} %), {c['xfail']} expected "
              f"failures, {c['failed']} unexpected failures")
    print(f"run time {elapsed:.1f} s")
    if markdown:
        print("\n| op | cases (incl. expanded) | passed | expected failures |\n|---|---:|---:|---:|")
        for op in sorted(per_op):
            c = per_op[op]
            print(f"| {op} | {sum(c.values())} | {c['passed']} | {c['xfail'] + c['failed']} |")
    unexpected = [n for n, r in results.items() if r == "failed"]
    for name in unexpected:
        print("UNEXPECTED FAILURE", name)
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main("--markdown" in sys.argv))
