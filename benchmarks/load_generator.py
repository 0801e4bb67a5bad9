"""Closed-loop gRPC load: `clients` concurrent clients, each sending its share of a fixed number
of Predict requests back to back, spread over several client processes so that the clients'
own Python (one GIL per process) is not what limits the measured server.

    with GrpcLoad(port, "mlp", {"X": x}, processes=4) as load:
        latencies, wall = load.run(clients=32, requests=2000)

Processes are spawned once (not forked: the parent may hold TensorFlow and gRPC threads) and
reused for every measurement; each runs clients / processes threads on one channel (gRPC
multiplexes the threads' calls on it, like a real client library), warms them up, then all
start together. Latency is per request (send to decoded answer); wall runs from the common
start to the last answer of any process.
"""
import multiprocessing
import statistics
import threading
import time
from typing import Dict, List, Tuple

import numpy as np

WARMUP_PER_CLIENT = 5


def _predict_caller(port, model, inputs):
    """(call, close) for TF Serving Predict with the official stubs; answers decoded."""
    import grpc
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    from serving.model_server.tensor_codec import to_ndarray, to_tensor_proto

    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    for name, value in inputs.items():
        request.inputs[name].CopyFrom(to_tensor_proto(value))

    def call():
        response = stub.Predict(request, timeout=120)
        return {k: to_ndarray(v) for k, v in response.outputs.items()}
    return call, channel.close


def raw_unary_caller(port, method, request: bytes):
    """(call, close) sending one pre-serialized unary request to `method` (no stubs, no
    decoding: the client's own work stays out of the measurement)."""
    import grpc
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    unary = channel.unary_unary(method)

    def call():
        return unary(request, timeout=120)
    return call, channel.close


def _timed_calls(call, count: int) -> List[float]:
    """Seconds of each of `count` consecutive calls."""
    seconds = []
    for _ in range(count):
        t0 = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - t0)
    return seconds


def _worker(make_caller, caller_args, commands, barrier, results):
    """A client process: one channel (`make_caller(*caller_args)`); per command (threads,
    per_client), runs that many closed-loop client threads (possibly none) and answers
    (latencies, start, end)."""
    call, close = make_caller(*caller_args)
    while True:
        command = commands.get()
        if command is None:
            break
        threads, per_client = command
        latencies: List[float] = []
        lock = threading.Lock()
        warmed, go = threading.Barrier(threads + 1), threading.Barrier(threads + 1)

        def client():
            for _ in range(WARMUP_PER_CLIENT):
                call()
            warmed.wait()
            go.wait()
            mine = _timed_calls(call, per_client)
            with lock:
                latencies.extend(mine)

        pool = [threading.Thread(target=client) for _ in range(threads)]
        for thread in pool:
            thread.start()
        warmed.wait()           # this process's clients are connected and warm
        barrier.wait()          # so are every other process's
        start = time.monotonic()
        go.wait()
        for thread in pool:
            thread.join()
        results.put((latencies, start, time.monotonic()) if threads else None)
    close()


class ClosedLoopLoad:
    """`processes` client processes against one server, each calling what
    `make_caller(*caller_args)` (a module-level function: it is run in the spawned process)
    returns; reused for several measurements."""

    def __init__(self, make_caller, caller_args, processes: int):
        self._context = multiprocessing.get_context("spawn")
        self._results = self._context.Queue()
        self._commands = [self._context.Queue() for _ in range(max(1, processes))]
        self._barrier = self._context.Barrier(len(self._commands) + 1)   # reused every run
        self._workers = [self._context.Process(target=_worker, daemon=True,
                                               args=(make_caller, caller_args, queue,
                                                     self._barrier, self._results))
                         for queue in self._commands]
        for worker in self._workers:
            worker.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def run(self, clients: int, requests: int) -> Tuple[List[float], float]:
        """(per-request latencies in seconds, wall seconds) for requests // clients calls
        per client from `clients` concurrent clients spread evenly over the processes."""
        processes = min(len(self._workers), clients)
        if clients % processes:
            raise ValueError(f"{clients} clients do not split evenly over {processes} processes")
        per_client = max(1, requests // clients)
        for index, queue in enumerate(self._commands):
            queue.put((clients // processes if index < processes else 0, per_client))
        self._barrier.wait(timeout=600)
        parts = [self._results.get(timeout=600) for _ in self._commands]
        parts = [part for part in parts if part is not None]
        latencies = [t for part in parts for t in part[0]]
        wall = max(p[2] for p in parts) - min(p[1] for p in parts)
        return latencies, wall

    def close(self) -> None:
        for queue in self._commands:
            queue.put(None)
        for worker in self._workers:
            worker.join(30)
            if worker.is_alive():
                worker.kill()


class GrpcLoad(ClosedLoopLoad):
    """TF Serving Predict requests of `inputs` to `model` with the official stubs.

        with GrpcLoad(port, "mlp", {"X": x}, processes=4) as load:
            latencies, wall = load.run(clients=8, requests=1600)
    """

    def __init__(self, port: int, model: str, inputs: Dict[str, np.ndarray], processes: int):
        super().__init__(_predict_caller, (port, model, inputs), processes)


def thread_load(call, clients, requests):
    """In-process load: `clients` threads each make requests // clients calls; (latencies,
    wall seconds)."""
    per_client = max(1, requests // clients)
    latencies, lock = [], threading.Lock()
    gate = threading.Barrier(clients + 1)

    def client():
        gate.wait()
        mine = _timed_calls(call, per_client)
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    gate.wait()
    t0 = time.perf_counter()
    for thread in threads:
        thread.join()
    return latencies, time.perf_counter() - t0


def summarize(latencies, wall):
    """(requests per second, p50 ms, p99 ms)."""
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return len(latencies) / wall, statistics.median(ordered) * 1e3, p99 * 1e3
