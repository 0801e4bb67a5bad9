"""Batch handling: dynamic batch sizes (RuntimeConfig.batching_dim), batching off (multiples of
the compiled batch only), batch axis 1, exact-shape subgraphs and cross-request batching."""
import datetime
import threading

import numpy as np
import pytest

from popef_builders import add_model, flatten_output_model
from tf_popef_op import runtime


def rand(shape, seed=None):
    return np.random.default_rng(seed).uniform(0, 1, shape).astype(np.float32)


def config(**kwargs):
    return runtime.RuntimeConfig(**kwargs)


def test_dynamic_batch_sizes_like_the_poprt_example():
    cfg = runtime.RuntimeConfig()
    cfg.timeout_ns = datetime.timedelta(microseconds=300)
    cfg.batching_dim = 0
    with runtime.ModelRunner(add_model(), cfg) as runner:
        for n in [1, 4, 7, 33]:
            x, y = rand((n, 2), n), rand((n, 2), n + 100)
            o = np.zeros((n, 2), np.float32)
            runner.execute({"X": x, "Y": y}, {"O": o})
            np.testing.assert_array_equal(o, x + y)
        s = runner.stats()
        assert s["rows"] == 45
        assert s["batches_run"] == 1 + 1 + 2 + 9  # ceil(n / 4)
        assert s["padded_rows"] == 3 + 0 + 1 + 3


def test_dynamic_batch_allocated_outputs_have_request_rows():
    with runtime.ModelRunner(add_model(), config(batching_dim=0, timeout_ns=0)) as runner:
        for n in (1, 2, 5, 9):
            x = rand((n, 2), n)
            out = runner.execute({"X": x, "Y": x})["O"]
            assert out.shape == (n, 2)
            np.testing.assert_array_equal(out, x + x)


def test_dynamic_batch_zero_rows_rejected():
    with runtime.ModelRunner(add_model(), config(batching_dim=0)) as runner:
        x = np.zeros((0, 2), np.float32)
        with pytest.raises(runtime.InvalidArgumentError, match="batch size 0 along axis 0; expected at least 1"):
            runner.execute({"X": x, "Y": x})


def test_inputs_must_agree_on_rows():
    with runtime.ModelRunner(add_model(), config(batching_dim=0)) as runner:
        with pytest.raises(runtime.InvalidArgumentError) as info:
            runner.execute({"X": rand((3, 2)), "Y": rand((5, 2))})
        assert str(info.value) == "inputs disagree on the batch size along axis 0: 'X' has 3, 'Y' has 5"


def test_batching_off_accepts_multiples():
    with runtime.ModelRunner(add_model()) as runner:
        for n in (4, 8, 12):
            x, y = rand((n, 2), n), rand((n, 2), 2 * n)
            np.testing.assert_array_equal(runner.execute({"X": x, "Y": y})["O"], x + y)
        s = runner.stats()
        assert s["batches_run"] == 1 + 2 + 3 and s["padded_rows"] == 0 and s["zero_copy_batches"] == 6


def test_batching_off_rejects_other_sizes():
    with runtime.ModelRunner(add_model()) as runner:
        x = rand((7, 2))
        with pytest.raises(runtime.InvalidArgumentError) as info:
            runner.execute({"X": x, "Y": x})
        assert str(info.value) == (
            "input 'X': batch size 7 along axis 0 is not a multiple of the compiled batch size 4 "
            "(got shape [7, 2], compiled [4, 2]); set RuntimeConfig.batching_dim to accept any batch size")


def test_batching_dim_1_on_a_2x4x3_model():
    """Batch along axis 1 with 2 outer blocks: rows are gathered into staging buffers."""
    with runtime.ModelRunner(add_model(shape=(2, 4, 3)), config(batching_dim=1, timeout_ns=0)) as runner:
        assert runner.subgraphs[0]["run_batch_axis"] == 1 and runner.subgraphs[0]["run_batch_size"] == 4
        for n in (1, 3, 4, 5, 9):
            x, y = rand((2, n, 3), n), rand((2, n, 3), n + 50)
            out = runner.execute({"X": x, "Y": y})["O"]
            assert out.shape == (2, n, 3)
            np.testing.assert_array_equal(out, x + y)
        s = runner.stats()
        assert s["zero_copy_batches"] == 0 and s["staged_batches"] == 1 + 1 + 1 + 2 + 3
        with pytest.raises(runtime.InvalidArgumentError,
                           match=r"input 'X': expected shape \[2, 4, 3\] \(any size along batch axis 1\), got \[3, 4, 3\]"):
            runner.execute({"X": rand((3, 4, 3)), "Y": rand((3, 4, 3))})


def test_batch_axis_1_with_batching_off():
    with runtime.ModelRunner(add_model(shape=(2, 4, 3), batch_axis=1)) as runner:
        x, y = rand((2, 8, 3), 1), rand((2, 8, 3), 2)
        np.testing.assert_array_equal(runner.execute({"X": x, "Y": y})["O"], x + y)
        assert runner.stats()["staged_batches"] == 2
        with pytest.raises(runtime.InvalidArgumentError, match="batch size 6 along axis 1 is not a multiple"):
            runner.execute({"X": rand((2, 6, 3)), "Y": rand((2, 6, 3))})


def test_batching_dim_beyond_rank_means_exact_shapes():
    with runtime.ModelRunner(add_model(), config(batching_dim=2)) as runner:
        x = rand((4, 2))
        np.testing.assert_array_equal(runner.execute({"X": x, "Y": x})["O"], x + x)
        with pytest.raises(runtime.InvalidArgumentError) as info:
            runner.execute({"X": rand((5, 2)), "Y": rand((5, 2))})
        assert str(info.value) == ("input 'X': expected shape [4, 2], got [5, 2] (the model accepts only its "
                                   "compiled shapes: anchor 'X' has rank 2, so it has no axis 2)")


def test_output_without_batch_axis_means_exact_shapes():
    with runtime.ModelRunner(flatten_output_model(), config(batching_dim=0)) as runner:
        sg = runner.subgraphs[0]
        assert sg["batched"] is False and sg["exact_shapes_reason"] == "anchor 'O' has no batch axis"
        x, y = np.array([[1, 1]], np.float32), np.array([[2, 2]], np.float32)
        np.testing.assert_array_equal(runner.execute({"X": x, "Y": y})["O"], [3, 3])
        with pytest.raises(runtime.InvalidArgumentError) as info:
            runner.execute({"X": rand((3, 2)), "Y": rand((3, 2))})
        assert "accepts only its compiled shapes: anchor 'O' has no batch axis" in str(info.value)


def test_cross_request_batching_packs_queued_requests():
    """Eight 1-row requests queued within the timeout run as two full batches of four."""
    cfg = config(batching_dim=0, timeout_ns=datetime.timedelta(seconds=5))
    with runtime.ModelRunner(add_model(), cfg) as runner:
        xs = [rand((1, 2), i) for i in range(8)]
        futures = [runner.execute_async({"X": x, "Y": x}) for x in xs]
        for f, x in zip(futures, xs):
            np.testing.assert_array_equal(f.result(timeout=30)["O"], x + x)
        s = runner.stats()
        assert s["requests"] == 8 and s["batches_run"] == 2 and s["padded_rows"] == 0
        assert s["multi_request_batches"] == 2 and s["staged_batches"] == 2


def test_cross_request_batching_request_spanning_batches():
    """Requests of 3 rows: batches hold rows of two requests, requests span two batches."""
    cfg = config(batching_dim=0, timeout_ns=datetime.timedelta(seconds=5))
    with runtime.ModelRunner(add_model(), cfg) as runner:
        xs = [rand((3, 2), i) for i in range(4)]  # 12 rows = 3 full batches
        futures = [runner.execute_async({"X": x, "Y": x}) for x in xs]
        for f, x in zip(futures, xs):
            np.testing.assert_array_equal(f.result(timeout=30)["O"], x + x)
        s = runner.stats()
        assert s["batches_run"] == 3 and s["padded_rows"] == 0 and s["multi_request_batches"] == 3


def test_cross_request_batching_from_many_threads():
    cfg = config(batching_dim=0, timeout_ns=datetime.timedelta(milliseconds=20))
    with runtime.ModelRunner(add_model(), cfg) as runner:
        errors = []
        barrier = threading.Barrier(8)

        def client(t):
            try:
                barrier.wait()
                for i in range(10):
                    x = rand((1, 2), t * 1000 + i)
                    np.testing.assert_array_equal(runner.execute({"X": x, "Y": x})["O"], 2 * x)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=client, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        s = runner.stats()
        assert s["requests"] == 80
        assert s["multi_request_batches"] > 0
        assert s["batches_run"] < s["requests"]


def test_timeout_runs_a_partial_batch_padded():
    cfg = config(batching_dim=0, timeout_ns=datetime.timedelta(milliseconds=1))
    with runtime.ModelRunner(add_model(), cfg) as runner:
        x = rand((2, 2))
        np.testing.assert_array_equal(runner.execute({"X": x, "Y": x})["O"], 2 * x)
        assert runner.stats()["padded_rows"] == 2
