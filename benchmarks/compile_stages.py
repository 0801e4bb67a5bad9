"""ONNX -> PopEF with the wall time of each stage: every converter pass (timed from the
converter's own "running pass" log records), the kernel fusion stage and PopEF emission
(compiler/compiler.py) and the lowering steps of compiler/lowering/lower_model.py (timed by
wrapping the functions they call, for this one call only; a step the compiler does not have is
not reported)."""
import contextlib
import importlib
import logging
import time
from typing import Dict, List, Tuple

import onnx

# (module, function it calls) for each timed step after conversion, in order.
_LOWERING_STEPS = (("compiler.compiler", "apply_kernel_fusion"),
                   *(("compiler.lowering.lower_model", name) for name in ("lower_graph", "plan_arena", "check_device_memory")),
                   ("compiler.compiler", "emit_popef"))


class _PassClock(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.marks: List[Tuple[str, float]] = []

    def emit(self, record):
        if record.msg == "running pass %s":
            self.marks.append((record.args[0], time.perf_counter()))


@contextlib.contextmanager
def _timed_lowering(stages: Dict[str, float]):
    # (compiler.lowering re-exports the function lower_model under the module's name)
    originals = {}
    for module_name, name in _LOWERING_STEPS:
        module = importlib.import_module(module_name)
        if hasattr(module, name):
            originals[(module, name)] = getattr(module, name)

    def timed(name, fn):
        def wrapper(*args, **kwargs):
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                stages[f"lower: {name}"] = stages.get(f"lower: {name}", 0.0) + time.perf_counter() - t0
        return wrapper

    for (module, name), fn in originals.items():
        setattr(module, name, timed(name, fn))
    try:
        yield
    finally:
        for (module, name), fn in originals.items():
            setattr(module, name, fn)


def compile_with_stages(model: onnx.ModelProto, batch: int, precision: str):
    """(Executable, converted ONNX model, {stage: seconds}, total seconds)."""
    from compiler import CompilerOptions
    from compiler.compiler import compile_converted
    from compiler.converter import Converter

    clock = _PassClock()
    logger = logging.getLogger(f"bench_models.compile.{id(clock)}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(clock)
    stages: Dict[str, float] = {}
    start = time.perf_counter()
    converter = Converter(batch_size=batch, precision=precision, logger=logger)
    converted = converter.convert(model)
    converted_at = time.perf_counter()
    marks = clock.marks + [("", converted_at)]
    if clock.marks:
        stages["convert: load + normalize"] = clock.marks[0][1] - start
    for (name, t0), (_, t1) in zip(marks, marks[1:]):
        stages[f"convert: {name}"] = t1 - t0
    with _timed_lowering(stages):
        executable = compile_converted(converted, CompilerOptions(batch_size=batch), "bench", converter.passes_run,
                                       converter.options)
    total = time.perf_counter() - start
    stages["lower: other (schedule glue, Executable parse)"] = (
        total - (converted_at - start) - sum(v for k, v in stages.items() if k.startswith("lower: ")))
    return executable, converted, stages, total
