"""Replays the seeds and saved reproducers (tests/fuzz/corpus/serving_*/) of the server's
request-decoder fuzz targets through the check the fuzzer runs: a decoded request or a clear
INVALID_ARGUMENT, nothing else (tests/fuzz/serving_decoders.py)."""
import importlib
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

SERVING_TARGETS = ("serving_rest_json", "serving_predict_proto", "serving_kserve_rest",
                   "serving_kserve_grpc")


def _files(target):
    folder = os.path.join(HERE, "corpus", target)
    return sorted(os.path.join(folder, f) for f in os.listdir(folder) if not f.startswith("."))


def _cases():
    for target in SERVING_TARGETS:
        for path in _files(target):
            yield pytest.param(target, path, id=f"{target}/{os.path.basename(path)}")


@pytest.mark.parametrize("target", SERVING_TARGETS)
def test_seeds_decode_clean(target):
    module = importlib.import_module(f"targets.{target}")
    seeds = module.seed_inputs()
    assert seeds
    for data in seeds:
        module.check(data)


@pytest.mark.parametrize("target,path", list(_cases()))
def test_reproducer_decodes_or_is_refused_clearly(target, path):
    with open(path, "rb") as f:
        importlib.import_module(f"targets.{target}").check(f.read())
