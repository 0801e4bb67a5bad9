"""Replays the seeds and saved reproducers of the fuzz targets that cannot run in the test
process (run_fuzz.SUBPROCESS_REPLAY: the server's generated `inference` protos clash with
tritonclient's) through the check the fuzzer runs, in a subprocess."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from run_fuzz import SUBPROCESS_REPLAY, regression_files  # noqa: E402

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


@pytest.mark.parametrize("target", SUBPROCESS_REPLAY)
def test_seeds_and_reproducers_in_a_subprocess(target):
    paths = regression_files(target)
    assert paths
    result = subprocess.run([sys.executable, "-c", _REPLAY, HERE, target, *paths],
                            capture_output=True, text=True, timeout=300, cwd=REPO,
                            env=dict(os.environ, PYTHONPATH=REPO, TF_CPP_MIN_LOG_LEVEL="2"))
    assert result.returncode == 0, result.stderr[-4000:]
