"""Replays the seeds and saved reproducers (tests/fuzz/corpus/serving_*/) of the server's
request-decoder fuzz targets through the check the fuzzer runs: a decoded request or a clear
INVALID_ARGUMENT, nothing else (tests/fuzz/serving_decoders.py)."""
import importlib
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

IN_PROCESS_TARGETS = ("serving_rest_json", "serving_predict_proto", "serving_kserve_rest")
# The server's generated `inference` protos clash with tritonclient's, which other test
# modules import into this process: this target replays in a subprocess.
SUBPROCESS_TARGET = "serving_kserve_grpc"
_REPLAY = """import importlib, sys
sys.path[:0] = [sys.argv[1]]
target = importlib.import_module("targets." + sys.argv[2])
seeds = target.seed_inputs()
assert seeds
for data in seeds:
    target.check(data)
for path in sys.argv[3:]:
    with open(path, "rb") as f:
        target.check(f.read())
"""


def _files(target):
    folder = os.path.join(HERE, "corpus", target)
    return sorted(os.path.join(folder, f) for f in os.listdir(folder) if not f.startswith("."))


def _cases():
    for target in IN_PROCESS_TARGETS:
        for path in _files(target):
            yield pytest.param(target, path, id=f"{target}/{os.path.basename(path)}")


@pytest.mark.parametrize("target", IN_PROCESS_TARGETS)
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


def test_kserve_grpc_seeds_and_reproducers_in_a_subprocess():
    paths = _files(SUBPROCESS_TARGET)
    assert paths
    result = subprocess.run([sys.executable, "-c", _REPLAY, HERE, SUBPROCESS_TARGET, *paths],
                            capture_output=True, text=True, timeout=300, cwd=REPO,
                            env=dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-4000:]
