"""The Bazel build of the op (WORKSPACE, //tf_popef_op/op:_popef_ops.so, against the pip
TensorFlow, offline) loads in TensorFlow and serves the seeds' fused SavedModel.

With bazel installed the test (re)builds the target first (a no-op when up to date). Without
bazel it uses an existing bazel-bin output; if there is none it fails under CI (CI=true, where
.ci/run installs bazel-bootstrap and builds the target) and is skipped otherwise."""
import os
import shutil
import subprocess

import pytest

from popef_models import REPO_ROOT, compile_fused_example, run_fresh

TARGET = "//tf_popef_op/op:_popef_ops.so"
BAZEL_LIBRARY = os.path.join(REPO_ROOT, "bazel-bin", "tf_popef_op", "op", "_popef_ops.so")


def bazel_library() -> str:
    bazel = shutil.which("bazel")
    if bazel:
        proc = subprocess.run([bazel, "build", TARGET], cwd=REPO_ROOT, capture_output=True, text=True, timeout=3000)
        assert proc.returncode == 0, f"bazel build {TARGET} failed:\n{proc.stderr[-4000:]}"
    if not os.path.exists(BAZEL_LIBRARY):
        if os.environ.get("CI"):
            pytest.fail(f"{BAZEL_LIBRARY} is missing: CI must build {TARGET} (.ci/run installs bazel-bootstrap)")
        pytest.skip(f"bazel is not installed and CI is unset, so {TARGET} was not built "
                    f"(apt-get install bazel-bootstrap, or run .ci/run)")
    return BAZEL_LIBRARY


def test_bazel_built_op_serves_the_fused_savedmodel(tmp_path):
    library = bazel_library()
    popef = compile_fused_example(str(tmp_path / "fused"))
    out = run_fresh("""
import json, sys
import numpy as np, tensorflow as tf, tf_popef_op
from serving.export import export_saved_model
export_saved_model(sys.argv[1], sys.argv[2])
loaded = tf.saved_model.load(sys.argv[2])
x = np.arange(6, dtype=np.float16).reshape(6, 1)
maps = open("/proc/self/maps").read()
with tf.compat.v1.Session(graph=tf.Graph()) as sess:
    meta = tf.compat.v1.saved_model.loader.load(sess, ["serve"], sys.argv[2])
    sig = meta.signature_def["graph0"]
    tf1 = sess.run(sig.outputs["O"].name, {sig.inputs["X"].name: np.ones([1, 2], np.float32),
                                           sig.inputs["Y"].name: np.full([1, 2], 2, np.float32)})
print(json.dumps({
    "library": tf_popef_op.op_library_path(),
    "package_library_loaded": "tf_popef_op/lib/_popef_ops.so" in maps,
    "graph0": loaded.signatures["graph0"](X=tf.ones([1, 2]), Y=tf.ones([1, 2]) * 2)["O"].numpy().tolist(),
    "graph1": loaded.signatures["graph1"](X=tf.constant(x))["O"].numpy().tolist(),
    "tf1_graph0": tf1.tolist()}))
""", popef, str(tmp_path / "models" / "fused" / "1"), env={"TF_POPEF_OP_LIBRARY": library})
    assert out["library"] == library and not out["package_library_loaded"]
    assert out["graph0"] == [3.0, 3.0] and out["tf1_graph0"] == [3.0, 3.0]
    assert out["graph1"] == [[float(i), 1.5, 2.0] for i in range(6)]
