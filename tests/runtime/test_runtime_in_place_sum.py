"""The runtime's check of in-place steps (docs/popef.md "Arena plan", `in_place_input`): the
compiler's plan of ResNet blocks, whose NchwcConv steps write Y on their residual Sum's bytes,
loads and matches the same blocks planned with separate bytes; a writer that puts Y on the Sum's
bytes without saying so, names another input or another op, or overwrites a Sum that a later
step still reads, is refused when the executable is loaded."""
import numpy as np
import pytest

from compiler import Compiler
from compiler.converter import Converter
from tests.integration.test_residual_in_place import _network, sums_in_place
from tests.runtime.popef_builders import with_edited_executable
from tf_popef_op import runtime

X = np.random.default_rng(3).standard_normal((1, 8, 14, 14)).astype(np.float32)


@pytest.fixture(scope="module")
def executable():
    exe = Compiler.compile(Converter(precision="fp32").convert(_network(1, wide=False)))
    assert sums_in_place(exe) == (3, 3)
    return exe


def _in_place_steps(doc):
    return [s for s in doc["programs"]["main"] if "in_place_input" in s]


def _load_error(data):
    with pytest.raises(runtime.InvalidArgumentError) as info:
        runtime.ModelRunner(data)
    return str(info.value)


def test_the_compilers_in_place_plan_loads_and_matches_separate_bytes(executable):
    def separate(doc):  # every in-place Y moved to fresh bytes past the arena's end
        end = doc["arena_bytes"]
        for step in _in_place_steps(doc):
            y = doc["tensors"][step["outputs"][0]]
            del step["in_place_input"]
            y["offset"] = end
            end += int(np.prod(y["shape"])) * 4 + 64
        doc["arena_bytes"] = end
    with runtime.ModelRunner(executable.to_bytes()) as runner:
        got = runner.execute({"X": X})["Y"]
    with runtime.ModelRunner(with_edited_executable(executable, separate)) as runner:
        want = runner.execute({"X": X})["Y"]
    np.testing.assert_array_equal(got, want)  # same kernels, same order: the same bits


def test_y_on_the_sums_bytes_without_in_place_input_is_refused(executable):
    def drop(doc):
        del _in_place_steps(doc)[0]["in_place_input"]
    assert "overlaps" in _load_error(with_edited_executable(executable, drop))


def test_in_place_input_naming_x_is_refused(executable):
    def name_x(doc):
        _in_place_steps(doc)[0]["in_place_input"] = 0
    message = _load_error(with_edited_executable(executable, name_x))
    assert "Y may take only the residual Sum's bytes" in message or "overlaps" in message


def test_in_place_input_on_another_op_is_refused(executable):
    def on_relu(doc):
        step = next(s for s in doc["programs"]["main"] if s["op"] != "NchwcConv" and s.get("inputs"))
        step["in_place_input"] = 0
    assert "does not take an input in place" in _load_error(with_edited_executable(executable, on_relu))


def test_a_sum_read_after_the_step_may_not_be_overwritten(executable):
    # The first in-place step's Sum also feeds a later step: Y may not take its bytes.
    def read_later(doc):
        step = _in_place_steps(doc)[0]
        total = step["inputs"][step["in_place_input"]]
        main = doc["programs"]["main"]
        later = main[main.index(step) + 1]
        later["inputs"][0] = total if doc["tensors"][later["inputs"][0]]["shape"] == \
            doc["tensors"][total]["shape"] else later["inputs"][0]
        assert total in later["inputs"], "the test needs a later step reading a tensor of the Sum's shape"
    assert "overlaps" in _load_error(with_edited_executable(executable, read_later))
