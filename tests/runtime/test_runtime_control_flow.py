"""Run-time control flow end to end (compiler -> PopEF version 2 -> C++ runtime): If on a
computed condition, Loop with a data-dependent condition / a run-time trip count, an If nested
in a Loop body, a Loop with scan outputs and a static trip count; numerics against
onnxruntime; and the runtime's validation of If/Loop steps."""

import numpy as np
import pytest

import compiler.converter.passes.unroll_control_flow as unroll
from compiler import Compiler
from compiler.converter import Converter
from tests.compiler import control_flow_models as models
from tests.runtime.popef_builders import with_edited_executable
from tests.compiler.compiler_test_helpers import ort_run
from tf_popef_op import runtime


def compile_and_run(model, feeds_list, rtol=1e-5, atol=1e-6):
    executable = Compiler.compile(model.SerializeToString())
    names = [o.name for o in model.graph.output]
    with runtime.ModelRunner(executable) as runner:
        for feeds in feeds_list:
            got = runner.execute(feeds)
            want = ort_run(model, feeds)
            for name, w in zip(names, want):
                assert got[name].shape == np.asarray(w).shape, name
                np.testing.assert_allclose(got[name].astype(np.float64), np.asarray(w, np.float64), rtol=rtol,
                                           atol=atol, err_msg=name)
    return executable


def main_ops(executable):
    return [s["op"] for s in executable.executable["programs"]["main"]]


def test_if_on_a_computed_condition_runs_the_branch_the_data_selects():
    x_pos = np.arange(6, dtype=np.float32).reshape(2, 3)
    executable = compile_and_run(models.if_model(), [{"x": x_pos}, {"x": -x_pos}, {"x": x_pos - 2.4}])
    assert "If" in main_ops(executable)
    assert executable.executable["version"] == 2
    programs = executable.executable["programs"]
    assert {"main/the_if/then", "main/the_if/else"} <= set(programs)


def test_if_in_fp16():
    x = np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3)
    model = models.if_model()
    executable = Compiler.compile(Converter(precision="fp16").convert(model).SerializeToString())
    with runtime.ModelRunner(executable) as runner:
        for feed in (x, -x + 0.5):
            got = runner.execute({"x": feed.astype(np.float16)})
            want = ort_run(model, {"x": feed})
            np.testing.assert_allclose(got["z"].astype(np.float32), want[0], rtol=2e-3, atol=2e-3)


def test_loop_with_a_data_dependent_condition_stops_when_the_data_says():
    x = np.full((2, 2), 0.3, np.float32)
    feeds = [{"x": x, "limit": np.array(limit, np.float32)} for limit in (2.0, -1.0, 4.7, 1000.0)]
    executable = compile_and_run(models.while_model(), feeds)
    assert main_ops(executable) == ["Loop"]


def test_loop_with_a_run_time_trip_count_and_initial_condition():
    x = np.arange(3, dtype=np.float32)
    feeds = [{"x": x, "M": np.array(m, np.int64), "go": np.array(go)} for m, go in
             ((4, True), (0, True), (7, False), (1, True), (-3, True))]
    compile_and_run(models.run_time_trip_count_model(), feeds)


def test_if_nested_in_a_loop_body_and_swapped_carried_values():
    feeds = [{"x": np.array([1, 2], np.float32), "steps": np.array(s, np.int64), "a": np.array([1, 2], np.float32),
              "b": np.array([3, 4], np.float32)} for s in ([2, 3], [0, 0], [1, 0], [4, 4])]
    executable = compile_and_run(models.if_in_loop_model(), feeds)
    programs = executable.executable["programs"]
    body = programs["main/outer_loop/body"]
    assert "If" in [s["op"] for s in body]
    assert any(name.startswith("main/outer_loop/body/inner_if/") for name in programs)


def test_loop_with_scan_outputs_and_a_static_trip_count(monkeypatch):
    # Static loops unroll; over the unroll limit they run as a Loop step (scan outputs then need
    # the constant trip count as their static length).
    monkeypatch.setattr(unroll, "MAX_UNROLLED_ITERATIONS", 3)
    rng = np.random.default_rng(0)
    feeds = [{"x": rng.standard_normal((6, 2, 3)).astype(np.float32)} for _ in range(2)]
    executable = compile_and_run(models.scan_loop_model(6), feeds)
    assert main_ops(executable) == ["Loop"]
    step = executable.executable["programs"]["main"][0]
    assert step["max_trip_count"] == 6 and step["trip_count"] == -1 and len(step["scan_outputs"]) == 1


def test_loop_in_a_loop_in_an_if_branch():
    x = np.array([1, -2, 3], np.float32)
    feeds = [{"x": x, "steps": np.array(s, np.int64)} for s in ([1, 2], [0, 0], [2, 2], [-1, 0])]
    executable = compile_and_run(models.loop_in_loop_in_if_model(), feeds)
    assert "main/top_if/then/outer_loop/body/inner_loop/body" in executable.executable["programs"]


def test_if_branch_returning_a_constant():
    compile_and_run(models.constant_branch_model(), [{"x": np.array([1, -2, 3], np.float32)},
                                                     {"x": np.array([-1, -2, -3], np.float32)}])


def test_loop_in_fp16():
    model = models.while_model()
    executable = Compiler.compile(Converter(precision="fp16").convert(model).SerializeToString())
    x = np.full((2, 2), 0.3, np.float32)
    with runtime.ModelRunner(executable) as runner:
        for limit in (2.0, 3.5):
            got = runner.execute({"x": x.astype(np.float16), "limit": np.array(limit, np.float16)})
            want = ort_run(model, {"x": x, "limit": np.array(limit, np.float32)})
            np.testing.assert_allclose(got["h_final"].astype(np.float32), want[0], rtol=2e-3, atol=2e-3)
            np.testing.assert_array_equal(got["n_final"], want[1])


def test_executable_without_control_flow_stays_version_1():
    model = models.scan_loop_model(4)  # static: unrolled, no Loop step
    executable = Compiler.compile(model.SerializeToString())
    assert executable.executable["version"] == 1
    assert "Loop" not in main_ops(executable)


# ---------------------------------------------------------------- runtime validation


@pytest.fixture(scope="module")
def if_executable():
    return Compiler.compile(models.if_model().SerializeToString())


def _load_error(data):
    with pytest.raises(runtime.errors.Error) as info:
        runtime.ModelRunner(data)
    return str(info.value)


def test_runtime_rejects_an_if_whose_condition_is_not_bool(if_executable):
    def edit(doc):
        step = next(s for s in doc["programs"]["main"] if s["op"] == "If")
        step["cond"] = next(t["id"] for t in doc["tensors"] if t["name"] == "s")  # the float sum
    message = _load_error(with_edited_executable(if_executable, edit))
    assert "programs.main[2].cond" in message and "must hold one bool" in message


def test_runtime_rejects_programs_that_call_themselves(if_executable):
    def edit(doc):
        step = next(s for s in doc["programs"]["main"] if s["op"] == "If")
        doc["programs"][step["then"]].append(dict(step))  # the then-branch runs the If again
    message = _load_error(with_edited_executable(if_executable, edit))
    assert "control flow makes programs call themselves" in message


def test_runtime_rejects_version_3(if_executable):
    def edit(doc):
        doc["version"] = 3
    message = _load_error(with_edited_executable(if_executable, edit))
    assert "Executable version 3 is not supported (this runtime supports 1 to 2)" in message
