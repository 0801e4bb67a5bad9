"""benchmarks/op_profiles.py: each runtime's per-op profile is the median over the profiled runs
(one disturbed run does not move it), OpenVINO's per-run layer times come from its running
means, and our and onnxruntime's profilers class a small Conv + AveragePool model's time. The
OpenVINO profiler itself runs in bench_models.py's profile part (openvino is a benchmark
requirement, not a test one)."""
import os
import sys

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import Compiler

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "benchmarks"))
import op_profiles  # noqa: E402


def test_a_disturbed_run_does_not_move_the_median():
    runs = [[("Conv", "Conv 3x3", 100.0), ("Relu", "Elementwise", 5.0)],
            [("Conv", "Conv 3x3", 900.0), ("Relu", "Elementwise", 5.0)],  # another process ran here
            [("Conv", "Conv 3x3", 110.0), ("Conv", "Conv 3x3", 10.0)]]    # two Conv steps; Relu absent
    by_op, by_class = op_profiles._median_of_runs(runs)
    assert by_op == {"Conv": 120.0, "Relu": 5.0}
    assert by_class == {"Conv 3x3": 120.0, "Elementwise": 5.0}
    assert list(by_class) == ["Conv 3x3", "Elementwise"]  # largest first


def test_openvino_runs_are_differences_of_running_means():
    # A 1-thread conv as the CPU plugin reported it: means over 1..5 inferences of runs of
    # 81 (warm-up), 27, 24, 24, 24 µs; a layer first executed in the second inference.
    means = [81.0, 54.0, 44.0, 39.0, 36.0]
    readings = [{"conv": ("Convolution", "Conv 3x3", m)} for m in means]
    for k, reading in enumerate(readings[1:], start=2):
        reading["pool"] = ("AvgPool", "Pooling/reduce", 10.0 * (k - 1) / k)
    runs = op_profiles.runs_from_running_means(readings)
    assert [[round(us, 6) for _, _, us, _ in run] for run in runs] == [[27.0, 10.0], [24.0, 10.0], [24.0, 10.0], [24.0, 10.0]]
    assert runs[0][0][:2] == ("Convolution", "Conv 3x3") and runs[0][1][3] == "pool"


def conv_model():
    w = np.random.default_rng(0).standard_normal((16, 8, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["X", "W"], ["C"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("AveragePool", ["C"], ["Y"], kernel_shape=[2, 2], strides=[2, 2], name="pool")]
    graph = helper.make_graph(nodes, "conv_pool", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 8, 32, 32])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 16, 16, 16])],
                              [numpy_helper.from_array(w, "W")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.fixture(scope="module")
def model_and_input():
    return conv_model(), np.random.default_rng(1).standard_normal((1, 8, 32, 32)).astype(np.float32)


def check(profile):
    assert profile["run_us"] > 0
    assert profile["by_class_us"]["Conv 3x3"] > 0
    assert sum(profile["by_class_us"].values()) <= 1.5 * profile["run_us"]


def test_modelrunner_profile(model_and_input):
    model, x = model_and_input
    profile = op_profiles.modelrunner_by_op(Compiler.compile(model), x, 3, model)
    check(profile)
    assert profile["kernel_calls"] >= 2


def test_onnxruntime_profile(model_and_input):
    model, x = model_and_input
    check(op_profiles.onnxruntime_by_op(model, x, 1, 3))


def swish_model():
    """Conv 3x3 -> x * sigmoid(x) -> AveragePool: ours runs the swish in the convolution's step,
    onnxruntime as Sigmoid and Mul kernels of their own."""
    w = np.random.default_rng(2).standard_normal((16, 8, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["X", "W"], ["C"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Sigmoid", ["C"], ["S"], name="sigmoid"),
             helper.make_node("Mul", ["C", "S"], ["A"], name="swish"),
             helper.make_node("AveragePool", ["A"], ["Y"], kernel_shape=[2, 2], strides=[2, 2], name="pool")]
    graph = helper.make_graph(nodes, "conv_swish_pool",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 8, 32, 32])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 16, 16, 16])],
                              [numpy_helper.from_array(w, "W")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_onnxruntime_swish_is_charged_to_our_fused_convolution():
    model = swish_model()
    x = np.random.default_rng(3).standard_normal((1, 8, 32, 32)).astype(np.float32)
    ours = op_profiles.modelrunner_by_op(Compiler.compile(model), x, 3, model)
    assert ours["class_of_step"]["conv"] == "Conv 3x3"
    assert "Elementwise" not in ours["by_class_us"]  # the swish is in the convolution's step
    charging = op_profiles.Charging(model, ours)
    assert charging.class_of_node == {"conv": "Conv 3x3", "sigmoid": "Conv 3x3", "swish": "Conv 3x3",
                                      "pool": "Pooling/reduce"}
    ort = op_profiles.onnxruntime_by_op(model, x, 1, 3, charging)
    assert ort["by_kernel_class_us"]["Elementwise"] > 0  # onnxruntime's own Sigmoid and Mul kernels
    assert "Elementwise" not in ort["by_class_us"]
    assert ort["charged_to_our_classes_us"] == pytest.approx(ort["by_kernel_class_us"]["Elementwise"])
    # each run's convolution plus its swish: the median of those sums is above the convolution's own
    assert ort["by_class_us"]["Conv 3x3"] > ort["by_kernel_class_us"]["Conv 3x3"]
