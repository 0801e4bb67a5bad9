"""Replays every fuzz seed and every saved reproducer (tests/fuzz/corpus/<target>/) through the
same check the fuzzer runs: a clean accept or a clear error of the component's own error type
(the server's decoders: a decoded request or a clear INVALID_ARGUMENT), and, for the runtime,
the differential oracle (tests/fuzz/targets/runtime_popef.py). The targets that cannot share
this process replay in test_fuzz_serving_corpus.py."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from run_fuzz import IN_PROCESS_REPLAY, TARGETS, regression_files  # noqa: E402


def _cases():
    for target in IN_PROCESS_REPLAY:
        for path in regression_files(target):
            yield pytest.param(target, path, id=f"{target}/{os.path.basename(path)}")


def _target(name):
    import importlib
    return importlib.import_module(f"targets.{name}")


def test_every_target_has_a_regression_corpus_folder():
    assert all(os.path.isdir(os.path.join(HERE, "corpus", t)) for t in TARGETS)


@pytest.mark.parametrize("target", IN_PROCESS_REPLAY)
def test_seeds_run_clean(target):
    module = _target(target)
    seeds = module.seed_inputs()
    assert seeds
    for data in seeds:
        module.check(data)


@pytest.mark.parametrize("target,path", list(_cases()))
def test_reproducer_runs_clean(target, path):
    with open(path, "rb") as f:
        _target(target).check(f.read())

