"""`import tf_popef_op` registers the PopefExecute op, as TensorFlow add-on packages do: a
SavedModel exported by serving.export loads with TensorFlow's own loaders (TF2 and the TF1
Session loader) in either import order, `import tf_popef_op.runtime` alone never imports
TensorFlow, TensorFlow's saved_model_cli runs the model through tf_popef_op.saved_model_cli (or
a sitecustomize), and a missing op's error says how to register it. Every scenario runs in a
fresh process: imports and op registration are process-wide. Results are checked against
TensorFlow's own Add (the model is O = X + Y)."""
import os
import subprocess
import sys

import pytest

from popef_models import REPO_ROOT, compile_add_model, export_fresh, run_fresh

X = [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]
Y = [[0.5, 0.25], [-1.0, 2.0], [8.0, -3.0]]


def _tf2_load(saved_model, imports: str) -> dict:
    """Runs `imports` (which may record facts in `checks`), then the TF2 loader and the default
    signature on saved_model, in a fresh process; returns `checks` with the results."""
    return run_fresh(f"""
import json, sys
checks = {{}}
{imports}
loaded = tf.saved_model.load(sys.argv[1])
x, y = tf.constant({X!r}), tf.constant({Y!r})
got = loaded.signatures["serving_default"](X=x, Y=y)["O"]
checks.update(equal=bool(tf.reduce_all(got == tf.add(x, y))), shape=got.shape.as_list(),
              hooks_left=[type(f).__name__ for f in sys.meta_path if "TensorFlow" in type(f).__name__])
print(json.dumps(checks))
""", saved_model)


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("registration")
    popef = compile_add_model(str(folder / "popef"), batch=4)
    return export_fresh(popef, str(folder / "model" / "1"))


@pytest.mark.parametrize("imports", ["import tensorflow as tf, tf_popef_op",
                                     "import tf_popef_op, tensorflow as tf"])
def test_tf2_loader_after_import_in_either_order(saved_model, imports):
    assert _tf2_load(saved_model, imports) == {"equal": True, "shape": [3, 2], "hooks_left": []}


def test_tf1_session_loader(saved_model):
    out = run_fresh("""
import json, sys
import tf_popef_op
import tensorflow as tf
with tf.compat.v1.Session(graph=tf.Graph()) as session:
    meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], sys.argv[1])
    signature = meta_graph.signature_def["serving_default"]
    feed = {signature.inputs["X"].name: %r, signature.inputs["Y"].name: %r}
    got = session.run(signature.outputs["O"].name, feed)
    want = session.run(tf.add(tf.constant(%r), tf.constant(%r)))
print(json.dumps({"equal": bool((got == want).all()), "shape": list(got.shape)}))
""" % (X, Y, X, Y), saved_model)
    assert out == {"equal": True, "shape": [3, 2]}


def test_runtime_import_never_imports_tensorflow_but_registers_once_tensorflow_is(saved_model):
    out = _tf2_load(saved_model, """
import tf_popef_op.runtime
checks["runtime_imported_tensorflow"] = "tensorflow" in sys.modules
import tensorflow as tf
""")
    assert out == {"runtime_imported_tensorflow": False, "equal": True, "shape": [3, 2],
                   "hooks_left": []}


def test_unloadable_library_warns_and_the_missing_op_error_says_how_to_register(saved_model):
    # TF_POPEF_OP_LIBRARY at a file that does not exist: the op cannot be registered.
    out = run_fresh("""
import json, sys, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import tf_popef_op
    import tensorflow as tf
warned = [str(w.message) for w in caught if "PopefExecute" in str(w.message)]
try:
    tf.saved_model.load(sys.argv[1])
    tf_error = ""
except Exception as error:
    tf_error = str(error)
from serving.model_server.servable import Servable
try:
    Servable("add", 1, sys.argv[1]).load()
    server_error = None
except Exception as error:
    server_error = {"code": error.code.name, "message": error.message}
print(json.dumps({"warned": warned, "tf_error": tf_error, "server_error": server_error,
                  "hint": tf_popef_op.ops.REGISTRATION_HINT}))
""", saved_model, env={"TF_POPEF_OP_LIBRARY": os.path.join(REPO_ROOT, "no", "_popef_ops.so")})
    hint = out["hint"]
    assert "import tf_popef_op" in hint and "tf_popef_op.saved_model_cli" in hint
    assert len(out["warned"]) == 1 and out["warned"][0].endswith(hint)
    assert "no/_popef_ops.so" in out["warned"][0]
    assert "Op type not registered 'PopefExecute'" in out["tf_error"]
    assert out["server_error"]["code"] == "NOT_FOUND"
    assert "Op type not registered 'PopefExecute'" in out["server_error"]["message"]
    assert out["server_error"]["message"].endswith(hint)


def _cli(args, env=None):
    full_env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2",
                    PYTHONPATH=os.pathsep.join([REPO_ROOT, os.environ.get("PYTHONPATH", "")]))
    full_env.update(env or {})
    proc = subprocess.run(args, capture_output=True, text=True, env=full_env, timeout=300,
                          cwd=REPO_ROOT)
    assert proc.returncode == 0, f"{args} failed (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def _run_args(saved_model):
    return ["run", "--dir", saved_model, "--tag_set", "serve", "--signature_def",
            "serving_default", "--input_exprs", f"X={X};Y={Y}"]


def _printed_result(stdout):
    import numpy as np
    text = stdout.split("Result for output key O:", 1)[1]
    got = np.array([[float(v) for v in row.strip(" []").split()]
                    for row in text.strip().splitlines()], np.float32)
    return got.tolist()


def _expected():
    import numpy as np
    return (np.array(X, np.float32) + np.array(Y, np.float32)).tolist()


def test_saved_model_cli_wrapper_runs(saved_model):
    ran = _cli([sys.executable, "-m", "tf_popef_op.saved_model_cli"] + _run_args(saved_model))
    assert _printed_result(ran) == _expected()


def test_tensorflow_saved_model_cli_shows_as_is_and_runs_with_a_sitecustomize(saved_model, tmp_path):
    # TensorFlow's console script, installed with tensorflow next to this interpreter.
    tensorflow_cli = [os.path.join(os.path.dirname(sys.executable), "saved_model_cli")]
    shown = _cli(tensorflow_cli + ["show", "--dir", saved_model, "--all"])
    assert "signature_def['serving_default']" in shown and "'PopefExecute'" in shown
    assert "inputs['X']" in shown and "outputs['O']" in shown
    # Only the concrete-function listing needs the op (TensorFlow's own message).
    assert "N/A (could not be listed due to the existence of custom ops" in shown
    (tmp_path / "sitecustomize.py").write_text("import tf_popef_op\n")
    ran = _cli(tensorflow_cli + _run_args(saved_model), env={"PYTHONPATH": os.pathsep.join(
        [str(tmp_path), REPO_ROOT, os.environ.get("PYTHONPATH", "")])})
    assert _printed_result(ran) == _expected()
