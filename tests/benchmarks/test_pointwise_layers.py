"""benchmarks/pointwise_layers.py: its one-layer models are ResNet50's 1x1 layer ends (Conv + bias
[+ residual Add] + Relu, checked against numpy through onnxruntime), and both profilers find the
layer's one convolution (ours compiled and run for real)."""
import os
import sys

import numpy as np
import pytest
from onnx import numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "benchmarks"))

from pointwise_layers import layer_model, ort_node_us, ours_step_us  # noqa: E402


def _feeds(c, hw, m, with_sum, batch):
    rng = np.random.default_rng(3)
    feeds = {"X": rng.standard_normal((batch, c, hw, hw)).astype(np.float32)}
    if with_sum:
        feeds["R"] = rng.standard_normal((batch, m, hw, hw)).astype(np.float32)
    return feeds


@pytest.mark.parametrize("with_sum", [True, False])
def test_layer_model_computes_conv_bias_sum_relu(with_sum):
    from onnxruntime_peer import cpu_session
    c, hw, m, batch = 16, 6, 24, 2
    model, flops = layer_model(c, hw, m, with_sum, batch)
    assert flops == 2.0 * batch * m * hw * hw * c
    feeds = _feeds(c, hw, m, with_sum, batch)
    got = cpu_session(model, 1).run(None, feeds)[0]
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    want = np.einsum("mc,nchw->nmhw", inits["W"][:, :, 0, 0], feeds["X"]) + inits["B"][None, :, None, None]
    if with_sum:
        want = want + feeds["R"]
    np.testing.assert_allclose(got, np.maximum(want, 0), rtol=1e-4, atol=1e-4)


def test_both_profiles_time_the_one_convolution():
    from compile_stages import compile_with_stages
    from tf_popef_op.runtime import ModelRunner, RuntimeConfig
    c, hw, m, batch = 16, 8, 32, 1
    model, _ = layer_model(c, hw, m, True, batch)
    feeds = _feeds(c, hw, m, True, batch)
    with ModelRunner(compile_with_stages(model, batch, "fp32")[0], RuntimeConfig(profile=True)) as runner:
        assert ours_step_us(runner, feeds, 3) > 0
    assert ort_node_us(model, feeds, 1, 3) > 0
