"""The runtime's check of in-place steps (docs/popef.md "Arena plan", `in_place_input`): the
compiler's plan of ResNet blocks, whose NchwcConv steps write Y on their residual Sum's bytes,
loads (tests/integration/test_residual_in_place.py runs it against onnxruntime); a writer that
puts Y on the Sum's bytes without saying so, names another input or another op, or overwrites a
Sum that a later step still reads, is refused when the executable is loaded."""
import pytest

from compiler import Compiler
from compiler.converter import Converter
from tests.integration.residual_blocks import resnet_blocks, sums_in_place
from tests.runtime.popef_builders import with_edited_executable
from tf_popef_op import runtime


@pytest.fixture(scope="module")
def executable():
    exe = Compiler.compile(Converter(precision="fp32").convert(resnet_blocks(1, wide=False)))
    assert sums_in_place(exe) == (3, 3)
    return exe


def _in_place_steps(doc):
    return [s for s in doc["programs"]["main"] if "in_place_input" in s]


def _load_error(data):
    with pytest.raises(runtime.InvalidArgumentError) as info:
        runtime.ModelRunner(data)
    return str(info.value)


def test_y_on_the_sums_bytes_without_in_place_input_is_refused(executable):
    def drop(doc):
        del _in_place_steps(doc)[0]["in_place_input"]
    assert "overlaps" in _load_error(with_edited_executable(executable, drop))


def test_in_place_input_naming_x_is_refused(executable):
    def name_x(doc):
        _in_place_steps(doc)[0]["in_place_input"] = 0
    assert "in_place_input" in _load_error(with_edited_executable(executable, name_x))


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
