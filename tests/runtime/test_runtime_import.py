"""Importing the runtime must not import TensorFlow, and must work from any directory."""
import os
import subprocess
import sys

import tf_popef_op

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(tf_popef_op.__file__)))


def test_import_does_not_import_tensorflow(tmp_path):
    code = ("import sys\n"
            "import tf_popef_op.runtime as rt\n"
            "from tf_popef_op.runtime import ModelRunner, RuntimeConfig, DeviceManager\n"
            "assert 'tensorflow' not in sys.modules, 'tensorflow was imported'\n"
            "print(len(rt.kernel_ops()), DeviceManager().device_count)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO_ROOT, os.environ.get("PYTHONPATH", "")]))
    env.pop("TF_POPEF_DEVICES", None)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    n_ops, n_devices = map(int, out.stdout.split())
    assert n_ops > 0 and n_devices == 8


def test_package_is_self_contained():
    lib = os.path.join(os.path.dirname(tf_popef_op.__file__), "lib")
    assert os.path.exists(os.path.join(lib, "libtfpopef_runtime.so"))
    assert os.path.exists(os.path.join(lib, "libscipy_openblas.so"))
