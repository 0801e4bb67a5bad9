"""The helpers of benchmarks/bench_models.py that decide what its numbers mean: the FLOP count
behind the GFLOP/s column (checked against MACs worked out by hand) and the interleaved timing
loop (every contender timed once per iteration, iteration limits honoured)."""
import os
import sys
import time

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "benchmarks"))

from flop_count import count_flops  # noqa: E402
from interleaved_timing import interleaved, summary  # noqa: E402


def _init(name, shape):
    return numpy_helper.from_array(np.zeros(shape, np.float32), name)


def _model(nodes, inputs, outputs, inits):
    graph = helper.make_graph(nodes, "flops", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_conv_counts_output_elements_times_kernel_volume_per_group():
    # 3x3 conv 3 -> 4 channels, pad 1, on 2x3x8x8: 2*4*8*8 outputs x 3*3*3 taps;
    # then a depthwise 3x3 (group 4): 2*4*8*8 outputs x 1*3*3 taps, stride 2 -> 2*4*4*4 outputs.
    model = _model([helper.make_node("Conv", ["X", "W"], ["Y"], pads=[1, 1, 1, 1]),
                    helper.make_node("Conv", ["Y", "D"], ["Z"], pads=[1, 1, 1, 1], strides=[2, 2], group=4)],
                   [("X", (2, 3, 8, 8))], ["Z"], [_init("W", (4, 3, 3, 3)), _init("D", (4, 1, 3, 3))])
    assert count_flops(model) == 2 * (2 * 4 * 8 * 8 * 27 + 2 * 4 * 4 * 4 * 9)


def test_matmul_gemm_and_conv_transpose():
    model = _model([helper.make_node("MatMul", ["A", "B"], ["M"]),                # [2,5,6] x [6,7]: 2*5*7 x 6
                    helper.make_node("Gemm", ["G", "H"], ["N"], transA=1),        # A^T [3,4] x [4,9]: 3*9 x 4
                    helper.make_node("ConvTranspose", ["T", "K"], ["U"]),         # 1x2x3x3 in, K [2,5,2,2]: 18 x 5*4
                    helper.make_node("Relu", ["M"], ["R"])],                      # not counted
                   [("A", (2, 5, 6)), ("G", (4, 3)), ("T", (1, 2, 3, 3))], ["R", "N", "U"],
                   [_init("B", (6, 7)), _init("H", (4, 9)), _init("K", (2, 5, 2, 2))])
    assert count_flops(model) == 2 * (2 * 5 * 7 * 6 + 3 * 9 * 4 + 18 * 20)


def test_einsum_counts_the_product_of_every_index():
    # attention scores bhqd,bhkd->bhqk on [2,4,8,16] x [2,4,8,16]: b*h*q*k*d = 2*4*8*8*16 MACs
    model = _model([helper.make_node("Einsum", ["Q", "K"], ["S"], equation="bhqd,bhkd->bhqk")],
                   [("Q", (2, 4, 8, 16)), ("K", (2, 4, 8, 16))], ["S"], [])
    assert count_flops(model) == 2 * (2 * 4 * 8 * 8 * 16)


def test_dynamic_shapes_are_refused_by_name():
    model = _model([helper.make_node("MatMul", ["A", "B"], ["M"])], [("A", ("batch", 6))], ["M"], [_init("B", (6, 7))])
    with pytest.raises(ValueError, match="MatMul node"):
        count_flops(model)


def test_interleaved_times_every_contender_once_per_iteration():
    calls = []
    samples = interleaved({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
                          warmup=1, min_iters=4, max_iters=4, budget_s=10.0, gap_s=0.0)
    assert [len(samples["a"]), len(samples["b"])] == [4, 4]
    assert calls == ["a", "b"] + ["a", "b", "b", "a", "a", "b", "b", "a"]  # warm-up, then rotated order
    s = summary([0.001, 0.002, 0.003])
    assert s["median_ms"] == pytest.approx(2.0) and s["iterations"] == 3


def test_peak_from_samples_takes_the_better_median_of_the_peak_contenders_only():
    from sgemm_peak import PREFIX, peak_from_samples
    n = 100  # 2 * 100^3 = 2e6 FLOPs per call
    samples = {PREFIX + "ModelRunner": [0.002, 0.001, 0.003],  # median 2 ms -> 1 GFLOP/s
               PREFIX + "onnxruntime": [0.004, 0.004, 0.001],  # median 4 ms -> 0.5 GFLOP/s (best 2)
               "ModelRunner fp32": [1e-9]}                     # a model in the same cell: ignored
    peak = peak_from_samples(samples, n, threads=2)
    assert set(peak["by"]) == {"ModelRunner", "onnxruntime"}
    assert peak["peak_from"] == "ModelRunner" and peak["peak_gflops"] == pytest.approx(1.0)
    assert peak["by"]["onnxruntime"]["best_gflops"] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="no 'sgemm peak: ' contender"):
        peak_from_samples({"ModelRunner fp32": [0.001]}, n, threads=2)


def test_block_schedule_rotates_the_order_each_round():
    from interleaved_timing import block_schedule
    assert block_schedule(["a", "b", "c"], runs=20, rounds=4) == [
        ("a", 20), ("b", 20), ("c", 20), ("b", 20), ("c", 20), ("a", 20),
        ("c", 20), ("a", 20), ("b", 20), ("a", 20), ("b", 20), ("c", 20)]


def test_runs_per_block_fit_the_budget_within_bounds():
    from interleaved_timing import runs_per_block
    # 3 rounds x (0.01 + 0.02) s per run of all = 0.09 s: 1.8 s of budget holds 20 runs
    assert runs_per_block({"a": 0.01, "b": 0.02}, rounds=3, budget_s=1.8) == 20
    assert runs_per_block({"a": 0.01, "b": 0.02}, rounds=3, budget_s=0.9) == 10
    assert runs_per_block({"a": 0.01, "b": 0.02}, rounds=3, budget_s=100.0) == 20   # at most max_runs
    assert runs_per_block({"a": 1.0, "b": 2.0}, rounds=3, budget_s=1.0) == 5          # never under min_runs
    assert runs_per_block({"a": 1.0}, rounds=1, budget_s=1.0, max_runs=4, min_runs=2) == 2


def test_blocks_run_consecutively_and_drop_each_blocks_first_call():
    from interleaved_timing import blocks
    calls = []
    samples = blocks({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, runs=2, rounds=2,
                     settle_s=0.0)
    assert calls == ["a"] * 3 + ["b"] * 3 + ["b"] * 3 + ["a"] * 3  # 1 untimed + 2 timed per block
    assert [len(samples["a"]), len(samples["b"])] == [4, 4]


def test_blocks_settle_for_a_time_before_timing(monkeypatch):
    import interleaved_timing
    clock, calls = [0.0], []
    # A fake clock each call advances by 10 ms: a sleep overshooting under load cannot change the count.
    monkeypatch.setattr(interleaved_timing.time, "perf_counter", lambda: clock[0])

    def slow(label):
        return lambda: (calls.append(label), clock.__setitem__(0, clock[0] + 0.01))

    samples = interleaved_timing.blocks({"a": slow("a"), "b": slow("b")}, runs=2, rounds=1, settle_s=0.035)
    assert calls == ["a"] * 4 + ["a"] * 2 + ["b"] * 4 + ["b"] * 2  # 10 ms calls until 35 ms have passed, then the 2 timed ones
    assert samples == {"a": pytest.approx([0.01, 0.01]), "b": pytest.approx([0.01, 0.01])}


def test_warm_median_times_only_the_calls_after_as_many_untimed_ones():
    from interleaved_timing import warm_median
    durations = iter([0.05, 0.05, 0.05, 0.001, 0.002, 0.003])  # 3 slow warm-up calls, 3 timed

    def call():
        time.sleep(next(durations))

    median = warm_median(call, runs=3)
    assert 0.0015 < median < 0.02  # the timed calls' middle one (2 ms), none of the 50 ms warm-ups
    with pytest.raises(StopIteration):
        call()  # exactly 2 x runs calls were made
