"""tf_popef_op.runtime.num_threads(): the intra-op pool size from TF_POPEF_NUM_THREADS (default:
the number of cores), checked in fresh processes because the pool is sized once per process."""
import os
import subprocess
import sys

import pytest

import tf_popef_op

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(tf_popef_op.__file__)))
SCRIPT = """
from tf_popef_op import runtime
try:
    print(runtime.num_threads())
except runtime.InvalidArgumentError as e:
    print("InvalidArgumentError:", e)
"""


def num_threads_with(value):
    env = dict(os.environ)
    env.pop("TF_POPEF_NUM_THREADS", None)
    if value is not None:
        env["TF_POPEF_NUM_THREADS"] = value
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=REPO_ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.mark.parametrize("value", ["1", "3"])
def test_num_threads_from_environment(value):
    assert num_threads_with(value) == value


def test_num_threads_defaults_to_the_cores():
    assert num_threads_with(None) == str(max(1, os.cpu_count() or 1))


def test_invalid_num_threads():
    assert num_threads_with("many") == (
        'InvalidArgumentError: TF_POPEF_NUM_THREADS="many": expected an integer in 1..1024')
