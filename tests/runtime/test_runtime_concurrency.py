"""Many caller threads sharing one runner: every result matches its own inputs, with and without
dynamic batching, with small queues (producers block instead of failing) and async futures."""
import datetime
import threading

import numpy as np
import pytest

from popef_builders import add_model
from tf_popef_op import runtime

THREADS = 16
CALLS = 60


def run_clients(target, threads=THREADS):
    errors = []
    barrier = threading.Barrier(threads)

    def wrapper(t):
        try:
            barrier.wait()
            target(t)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"thread {t}: {e!r}")

    workers = [threading.Thread(target=wrapper, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=300)
    assert not any(w.is_alive() for w in workers), "a client thread hung"
    assert not errors, errors[:5]


@pytest.mark.parametrize("cfg", [
    runtime.RuntimeConfig(),
    runtime.RuntimeConfig(batching_dim=0, timeout_ns=datetime.timedelta(microseconds=300)),
    runtime.RuntimeConfig(batching_dim=0, timeout_ns=0, ring_buffer_size_multiplier=1),
], ids=["batching-off", "dynamic", "dynamic-tiny-queues"])
def test_each_thread_gets_its_own_results(cfg):
    dynamic = cfg.batching_dim == 0
    with runtime.ModelRunner(add_model(), cfg) as runner:
        def client(t):
            rng = np.random.default_rng(t)
            for i in range(CALLS):
                n = int(rng.integers(1, 10)) if dynamic else 4 * int(rng.integers(1, 4))
                # Values unique to this thread and call, so a mixed-up row cannot pass.
                x = rng.uniform(-1, 1, (n, 2)).astype(np.float32) + 10 * t
                y = np.full((n, 2), i, np.float32)
                if i % 2:
                    o = np.empty((n, 2), np.float32)
                    runner.execute({"X": x, "Y": y}, {"O": o})
                else:
                    o = runner.execute({"X": x, "Y": y})["O"]
                np.testing.assert_array_equal(o, x + y)

        run_clients(client)
        s = runner.stats()
        assert s["requests"] == THREADS * CALLS and s["failed_requests"] == 0


def test_async_bursts_from_threads():
    cfg = runtime.RuntimeConfig(batching_dim=0, timeout_ns=datetime.timedelta(milliseconds=1))
    with runtime.ModelRunner(add_model(), cfg) as runner:
        def client(t):
            rng = np.random.default_rng(100 + t)
            pending = []
            for i in range(CALLS):
                n = int(rng.integers(1, 6))
                x = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
                y = np.full((n, 2), t * 1000 + i, np.float32)
                pending.append((runner.execute_async({"X": x, "Y": y}), x + y))
            for future, expected in pending:
                np.testing.assert_array_equal(future.result(timeout=120)["O"], expected)

        run_clients(client)
        assert runner.stats()["requests"] == THREADS * CALLS


def test_single_producer_without_thread_safety():
    cfg = runtime.RuntimeConfig(thread_safe=False, batching_dim=0, timeout_ns=0)
    with runtime.ModelRunner(add_model(), cfg) as runner:
        futures = []
        for i in range(200):
            x = np.full((1 + i % 5, 2), i, np.float32)
            futures.append((runner.execute_async({"X": x, "Y": x}), 2 * x))
        for future, expected in futures:
            np.testing.assert_array_equal(future.result(timeout=120)["O"], expected)


def test_concurrent_runners_on_one_device():
    """Runners of two executables pinned to one device, driven concurrently: the device runs one
    program at a time and every result is right despite the reloads."""
    from popef_builders import weight_model
    w1, w2 = np.full((4, 2), 2, np.float32), np.full((4, 2), -3, np.float32)
    cfg = runtime.RuntimeConfig(device_id=1)
    with runtime.ModelRunner(weight_model(w1), cfg) as a, runtime.ModelRunner(weight_model(w2), cfg) as b:
        def client(t):
            runner, w = (a, w1) if t % 2 else (b, w2)
            for i in range(20):
                x = np.full((4, 2), t + i, np.float32)
                np.testing.assert_array_equal(runner.execute({"X": x})["O"], (x + w) * x)

        run_clients(client, threads=8)
