"""A TensorFlow SavedModel with data-dependent control flow through the front end: tf2onnx turns
`tf.cond` into If and `tf.while_loop` into Loop, the compiler keeps them as run-time If/Loop
steps (their condition depends on the inputs), and the emulator matches TensorFlow."""
import numpy as np
import pytest

from compiler import Compiler
from tf_popef_op.runtime import ModelRunner

import tensorflow as tf  # noqa: E402


class ControlFlowModule(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([2, 3], tf.float32), tf.TensorSpec([], tf.float32)])
    def serve(self, x, limit):
        y = tf.cond(tf.reduce_sum(x) > 0, lambda: x * 2.0 + 1.0, lambda: -x)

        def cond(i, h):
            return tf.reduce_sum(h) < limit

        def body(i, h):
            return i + 1, h * 0.5 + x

        n, h = tf.while_loop(cond, body, [tf.constant(0), tf.zeros([2, 3])], maximum_iterations=50)
        return {"y": y, "h": h, "n": n}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    module = ControlFlowModule()
    path = str(tmp_path_factory.mktemp("tf_control_flow") / "saved_model")
    tf.saved_model.save(module, path, signatures={"serving_default": module.serve})
    return module, Compiler.compile(path)


def test_tf_cond_and_while_loop_run_as_if_and_loop_steps(compiled):
    _, executable = compiled
    ops = [s["op"] for s in executable.executable["programs"]["main"]]
    assert "If" in ops and "Loop" in ops


@pytest.mark.parametrize("x_value,limit", [(1.0, 3.0), (-1.0, -1.0), (0.2, 5.0), (0.5, 0.7)])
def test_matches_tensorflow(compiled, x_value, limit):
    module, executable = compiled
    x = np.full((2, 3), x_value, np.float32)
    x[0, 0] += 0.25
    with ModelRunner(executable) as runner:
        got = runner.execute({"x": x, "limit": np.array(limit, np.float32)})
    want = module.serve(tf.constant(x), tf.constant(limit, tf.float32))
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
