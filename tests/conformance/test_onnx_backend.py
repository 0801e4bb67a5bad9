"""The ONNX backend conformance suite (onnx.backend.test.BackendTest, node cases) run through
PopefBackend (Compiler + ModelRunner) for every case of every op the project claims
(claimed_cases.py). Cases that cannot pass are xfail with a documented reason
(expected_failures.py, docs/conformance.md), and test_expected_failures_fail_as_documented
checks that each of them fails with exactly its documented error."""
import re
import warnings

import onnx.backend.test
import pytest
from onnx.backend.test.runner import _normalize_tensor

from claimed_cases import claimed_cases
from expected_failures import EXPECTED_FAILURES
from popef_backend import PopefBackend

with warnings.catch_warnings():  # the case generators overflow casts and divide by zero on purpose
    warnings.simplefilter("ignore")
    CASES = claimed_cases()

backend_test = onnx.backend.test.BackendTest(PopefBackend, __name__)
for _name in CASES:
    backend_test.include(f"^{_name}_cpu$")
for _name in EXPECTED_FAILURES:
    backend_test.xfail(f"^{_name}_cpu$")

# BackendTest makes a test for every case of the suite (and every device), skipping those not
# included; only the claimed CPU cases are kept here, so nothing is silently skipped.
_SELECTED = {f"{name}_cpu" for name in CASES}
for _class_name, _test_class in backend_test.test_cases.items():
    for _attr in [a for a in vars(_test_class) if a.startswith("test_") and a not in _SELECTED]:
        delattr(_test_class, _attr)
    if any(a.startswith("test_") for a in vars(_test_class)):
        globals()[_class_name] = _test_class


def test_every_expected_failure_is_a_claimed_case():
    assert sorted(set(EXPECTED_FAILURES) - set(CASES)) == []


@pytest.mark.parametrize("name", sorted(EXPECTED_FAILURES))
def test_expected_failures_fail_as_documented(name):
    case = CASES[name]
    with pytest.raises(Exception) as failure:
        rep = PopefBackend.prepare(case.model)
        for inputs, _ in case.data_sets:
            rep.run([_normalize_tensor(x) for x in inputs])
    assert re.search(EXPECTED_FAILURES[name].error, str(failure.value)), str(failure.value)
