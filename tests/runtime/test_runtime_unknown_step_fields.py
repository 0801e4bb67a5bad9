"""The runtime refuses a step carrying a field it does not read (docs/popef.md "Programs"): as
with kernel attributes, a newer writer's additive field (a Loop's new stopping rule, a kernel
step's new operand role) may change what the step does, so a file with one is refused at load,
naming the file, the step's path and the field, rather than run without it. Every kind of step
the compiler writes (kernel, LoadTensorData, Switch, If, Loop) loads as written and refuses one
extra field."""
import pytest

from compiler import Compiler
from compiler.converter import Converter
from tests.compiler import control_flow_models
from tests.integration.residual_blocks import resnet_blocks
from tests.runtime.popef_builders import fused_model, with_edited_executable
from tf_popef_op import runtime

STEP_FIELDS = {  # the fields docs/popef.md gives each kind of step
    "kernel": ["op", "name", "inputs", "outputs", "attrs", "in_place_input"],
    "LoadTensorData": ["op", "tensor_data", "offset", "nbytes"],
    "Switch": ["op", "index_anchor", "cases"],
    "If": ["op", "name", "inputs", "outputs", "cond", "then", "else"],
    "Loop": ["op", "name", "inputs", "outputs", "body", "max_trip_count", "trip_count", "cond", "iter_num", "cond_in",
             "cond_out", "carried", "scan_outputs"],
}
ARTICLE = {"kernel": "a kernel", "LoadTensorData": "a LoadTensorData", "Switch": "a Switch", "If": "an If",
           "Loop": "a Loop"}

EXECUTABLES = {
    "resnet_blocks": lambda: Compiler.compile(Converter(precision="fp32").convert(resnet_blocks(1, wide=False))),
    "fused": fused_model,
    "if": lambda: Compiler.compile(control_flow_models.if_model().SerializeToString()),
    "loop": lambda: Compiler.compile(control_flow_models.while_model().SerializeToString()),
    "loop_in_loop_in_if": lambda: Compiler.compile(control_flow_models.loop_in_loop_in_if_model().SerializeToString()),
}


def _kind(step):
    return step["op"] if step["op"] in ("LoadTensorData", "Switch", "If", "Loop") else "kernel"


def _steps(executable):
    doc = executable.executable
    return [(program, i, step) for program, steps in doc["programs"].items() for i, step in enumerate(steps)]


@pytest.fixture(scope="module", params=list(EXECUTABLES))
def executable(request):
    return EXECUTABLES[request.param]()


def test_every_step_the_compiler_writes_loads(executable):
    for _, _, step in _steps(executable):
        assert set(step) <= set(STEP_FIELDS[_kind(step)]), step
    with runtime.ModelRunner(executable.to_bytes(), runtime.RuntimeConfig(validate_io_params=False)):
        pass


def test_an_extra_field_on_any_step_is_refused(executable):
    kinds_seen = set()
    for program, index, step in _steps(executable):
        kind = _kind(step)
        if kind == "kernel" and "kernel" in kinds_seen:
            continue  # one kernel step per executable is enough; every control step is tried
        kinds_seen.add(kind)

        def add(doc, program=program, index=index):
            doc["programs"][program][index]["future_field"] = 1

        with pytest.raises(runtime.InvalidArgumentError) as info:
            runtime.ModelRunner(with_edited_executable(executable, add))
        message = str(info.value)
        assert message.startswith("<memory>: "), message  # names the file
        assert (f"programs.{program}[{index}].future_field: unknown field of {ARTICLE[kind]} step "
                f"(its fields: {', '.join(STEP_FIELDS[kind])})") in message, message
        assert "a runtime that matches the compiler that wrote it" in message, message


def test_the_executables_hold_every_kind_of_step():
    kinds = {_kind(step) for make in EXECUTABLES.values() for _, _, step in _steps(make())}
    assert kinds == set(STEP_FIELDS), kinds
