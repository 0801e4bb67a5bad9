"""Model server throughput and latency: bounded concurrent gRPC clients on localhost against an
MLP compiled at batch 8 (PopEF, exported SavedModel), with and without --enable_batching, next
to in-process SavedModel signature calls with the same concurrency.

Every request is batch 1 (one row). Each client runs a fixed number of requests back to back;
throughput = all requests / wall time; p50/p99 over every request's latency. Clients are
threads in this process (official stubs), the server is a subprocess.

    .venv/bin/python benchmarks/bench_server.py [--requests 400] [--clients 1 8 32]
"""
import argparse
import concurrent.futures
import os
import platform
import statistics
import sys
import tempfile
import threading
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "serving"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc  # noqa: E402

import tf_popef_op  # noqa: E402
from benchmarks.mlp_model import build_mlp  # noqa: E402
from compiler import Compiler  # noqa: E402
from serving.export import export_saved_model  # noqa: E402
from serving_harness import ServerProcess  # noqa: E402

SIZES = (256, 512, 512, 16)
COMPILED_BATCH = 8
BATCHING = """max_batch_size { value: 8 }
batch_timeout_micros { value: 1000 }
max_enqueued_batches { value: 1000 }
num_batch_threads { value: 2 }
allowed_batch_sizes: 8
"""


def build_model(root):
    model = build_mlp(COMPILED_BATCH, list(SIZES))
    popef = os.path.join(root, "mlp.popef")
    Compiler.compile(model.SerializeToString(), ["Y"]).save(popef)
    export_saved_model(popef, os.path.join(root, "models", "mlp", "1"))
    return os.path.join(root, "models", "mlp")


def run_clients(call, clients, requests):
    """Each of `clients` threads makes requests // clients calls; returns latencies, wall."""
    per_client = max(1, requests // clients)
    latencies = []
    lock = threading.Lock()
    start_gate = threading.Barrier(clients + 1)

    def client(index):
        x = np.random.default_rng(index).standard_normal((1, SIZES[0])).astype(np.float32)
        mine = []
        start_gate.wait()
        for _ in range(per_client):
            t0 = time.perf_counter()
            call(x)
            mine.append(time.perf_counter() - t0)
        with lock:
            latencies.extend(mine)

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        futures = [pool.submit(client, i) for i in range(clients)]
        start_gate.wait()
        t0 = time.perf_counter()
        for future in futures:
            future.result()
        wall = time.perf_counter() - t0
    return latencies, wall


def summarize(latencies, wall):
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return len(latencies) / wall, statistics.median(ordered) * 1e3, p99 * 1e3


def grpc_caller(port):
    import grpc
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    stub = prediction_service_pb2_grpc.PredictionServiceStub(channel)

    def call(x):
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "mlp"
        request.inputs["X"].CopyFrom(tf.make_tensor_proto(x))
        response = stub.Predict(request, timeout=60)
        return tf.make_ndarray(response.outputs["Y"])
    return call, channel


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=400, help="requests per measurement")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as root:
        print(f"== compiling MLP {SIZES} at batch {COMPILED_BATCH} and exporting the SavedModel",
              flush=True)
        base = build_model(root)

        tf_popef_op.load_op_library()
        signature = tf.saved_model.load(os.path.join(base, "1")).signatures["serving_default"]

        def in_process(x):
            return signature(X=tf.constant(x))["Y"].numpy()
        reference = in_process(np.ones((1, SIZES[0]), np.float32))
        for clients in args.clients:
            run_clients(in_process, clients, min(args.requests, 50))   # warm
            rows.append(("in-process SavedModel", clients,
                         *summarize(*run_clients(in_process, clients, args.requests))))
            print(rows[-1], flush=True)

        (open(os.path.join(root, "batching.config"), "w")).write(BATCHING)
        for label, flags in (("server, batching off", []),
                             ("server, --enable_batching", [
                                 "--enable_batching",
                                 f"--batching_parameters_file={root}/batching.config"])):
            server = ServerProcess(os.path.join(root, label.replace(" ", "_").replace(",", "")),
                                   "--model_name=mlp", f"--model_base_path={base}",
                                   "--grpc_max_threads=64", *flags, rest=False).start()
            try:
                call, channel = grpc_caller(server.grpc_port)
                np.testing.assert_allclose(call(np.ones((1, SIZES[0]), np.float32)), reference,
                                           rtol=1e-5)
                for clients in args.clients:
                    run_clients(call, clients, min(args.requests, 50))
                    rows.append((label, clients,
                                 *summarize(*run_clients(call, clients, args.requests))))
                    print(rows[-1], flush=True)
                channel.close()
            finally:
                server.stop()

    print(f"\nMLP {SIZES}, compiled batch {COMPILED_BATCH}, batch-1 requests, "
          f"{args.requests} per row; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}\n")
    print("| path | clients | throughput req/s | p50 ms | p99 ms |")
    print("|---|---:|---:|---:|---:|")
    for label, clients, rps, p50, p99 in rows:
        print(f"| {label} | {clients} | {rps:.0f} | {p50:.3f} | {p99:.3f} |")


if __name__ == "__main__":
    main()
