"""Runtime error codes -> TF status codes (the kernel's one mapping, tf_status.h), including the
codes the op tests cannot provoke through a real request (DEADLINE_EXCEEDED, INTERNAL...).
Compiles tests/op/cc/tf_status_test.cc against the pip TensorFlow's headers and runs it."""
import json
import os
import subprocess
import sys

from popef_models import REPO_ROOT


def tf_flags():
    code = ("import json, tensorflow as tf; "
            "print(json.dumps([tf.sysconfig.get_compile_flags(), tf.sysconfig.get_link_flags(), tf.sysconfig.get_lib()]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_runtime_error_code_maps_to_the_tf_code_of_the_same_name(tmp_path):
    compile_flags, link_flags, tf_lib = tf_flags()
    compile_flags = ["-isystem" + f[2:] if f.startswith("-I") else f for f in compile_flags]
    binary = str(tmp_path / "tf_status_test")
    subprocess.run(["g++", "-O0", "-std=c++17", f"-I{REPO_ROOT}", *compile_flags,
                    os.path.join(REPO_ROOT, "tests", "op", "cc", "tf_status_test.cc"), "-o", binary,
                    *link_flags, f"-Wl,-rpath,{tf_lib}"], check=True, capture_output=True, text=True)
    run = subprocess.run([binary], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 failures" in run.stdout
    for code in ("INVALID_ARGUMENT", "NOT_FOUND", "FAILED_PRECONDITION", "DEADLINE_EXCEEDED", "INTERNAL"):
        assert f"ok   {code} -> {code} 'PopefExecute: input 'graph0/X': {code}'" in run.stdout
