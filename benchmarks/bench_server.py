"""Model server throughput and latency: bounded concurrent gRPC clients on localhost against an
MLP compiled at batch 8 (PopEF, exported SavedModel), without and with --enable_batching, next
to in-process SavedModel signature calls with the same concurrency.

Every request is batch 1 (one row). Each client sends its share of a fixed number of requests
back to back; throughput = all requests / wall time; p50/p99 over every request's latency.
gRPC clients use the official stubs in several client processes (benchmarks/load_generator.py)
so one client process's GIL does not cap the load; in-process calls are threads of this
process calling the signature directly (what a server could at best do).

"Unbatched" means truly one request per execution: the SavedModel is exported with
`cross_request_batching=False`, so the runtime runs every batch-1 request as its own
zero-padded batch of 8 (a model without a batcher in TF Serving), and `--enable_batching`
(TF Serving's batcher: max_batch_size 8 = the compiled batch) is then the only thing that
merges requests. `--packing` adds the default export, where the runtime itself packs rows of
concurrent requests into shared batches (no server batcher needed).

    .venv/bin/python benchmarks/bench_server.py [--requests 1600] [--clients 1 8 32]
"""
import argparse
import os
import platform
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "serving"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

COMPILED_BATCH = 8
DEFAULT_SIZES = (256, 2048, 2048, 16)
BATCHING = """max_batch_size { value: 8 }
batch_timeout_micros { value: 2000 }
max_enqueued_batches { value: 100 }
num_batch_threads { value: 2 }
allowed_batch_sizes: 8
"""


def build_models(root, sizes, packing):
    """{export name: base path}: 'alone' (one request per execution) and, with packing,
    'packing' (the default export: the runtime packs concurrent requests)."""
    from benchmarks.mlp_model import build_mlp
    from compiler import Compiler
    from serving.export import export_saved_model
    model = build_mlp(COMPILED_BATCH, list(sizes))
    popef = os.path.join(root, "mlp.popef")
    Compiler.compile(model.SerializeToString(), ["Y"]).save(popef)
    bases = {"alone": os.path.join(root, "alone", "mlp")}
    export_saved_model(popef, os.path.join(bases["alone"], "1"), cross_request_batching=False)
    if packing:
        bases["packing"] = os.path.join(root, "packing", "mlp")
        export_saved_model(popef, os.path.join(bases["packing"], "1"))
    return bases


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=1600, help="requests per measurement")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--client_processes", type=int, default=4,
                        help="gRPC client processes (at most one per client)")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES),
                        help="MLP layer widths, input first")
    parser.add_argument("--packing", action="store_true",
                        help="also measure the default export (runtime packs requests)")
    parser.add_argument("--repeats", type=int, default=1,
                        help="measure every row this many times, interleaved; report the best")
    args = parser.parse_args()

    import tensorflow as tf

    import tf_popef_op
    from benchmarks.load_generator import GrpcLoad, summarize, thread_load
    from serving_harness import ServerProcess

    x = np.random.default_rng(0).standard_normal((1, args.sizes[0])).astype(np.float32)
    results = {}   # (label, clients) -> best (throughput, p50, p99)

    def record(label, clients, measured):
        row = summarize(*measured)
        best = results.get((label, clients))
        if best is None or row[0] > best[0]:
            results[(label, clients)] = row
        print(f"{label:34s} clients {clients:3d}: {row[0]:7.0f} req/s  p50 {row[1]:7.3f} ms  "
              f"p99 {row[2]:7.3f} ms", flush=True)

    with tempfile.TemporaryDirectory() as root:
        print(f"== compiling MLP {args.sizes} at batch {COMPILED_BATCH}, exporting", flush=True)
        bases = build_models(root, args.sizes, args.packing)
        tf_popef_op.load_op_library()
        with open(os.path.join(root, "batching.config"), "w") as handle:
            handle.write(BATCHING)
        batching_flags = ["--enable_batching", f"--batching_parameters_file={root}/batching.config"]
        servers = [("server, unbatched", "alone", [])]
        servers.append(("server, --enable_batching", "alone", batching_flags))
        if args.packing:
            servers.append(("server, runtime packing", "packing", []))
        in_process = [("in-process, unbatched", "alone")]
        if args.packing:
            in_process.append(("in-process, runtime packing", "packing"))

        signatures = {name: tf.saved_model.load(os.path.join(bases[name], "1"))
                      .signatures["serving_default"] for _, name in in_process}
        reference = signatures["alone"](X=tf.constant(x))["Y"].numpy()
        for repeat in range(args.repeats):
            for label, name in in_process:
                signature = signatures[name]

                def call(signature=signature):
                    return signature(X=tf.constant(x))["Y"].numpy()
                for clients in args.clients:
                    thread_load(call, clients, min(args.requests, 100))   # warm
                    record(label, clients, thread_load(call, clients, args.requests))
            for label, name, flags in servers:
                server = ServerProcess(os.path.join(root, f"server{len(results)}"),
                                       "--model_name=mlp", f"--model_base_path={bases[name]}",
                                       "--grpc_max_threads=64", *flags, rest=False).start()
                try:
                    with GrpcLoad(server.grpc_port, "mlp", {"X": x},
                                  args.client_processes) as load:
                        for clients in args.clients:
                            record(label, clients, load.run(clients, args.requests))
                finally:
                    server.stop()
        answer = _one_answer(bases["alone"], x)
        np.testing.assert_allclose(answer, reference, rtol=1e-5)

    print(f"\nMLP {args.sizes}, compiled batch {COMPILED_BATCH}, batch-1 requests, "
          f"{args.requests} per row, best of {args.repeats}; up to {args.client_processes} "
          f"client processes; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
          f"{time.strftime('%Y-%m-%d')}\n")
    print("| path | clients | throughput req/s | p50 ms | p99 ms |")
    print("|---|---:|---:|---:|---:|")
    for (label, clients), (rps, p50, p99) in results.items():
        print(f"| {label} | {clients} | {rps:.0f} | {p50:.3f} | {p99:.3f} |")
    print()
    for clients in args.clients:
        base = results.get(("in-process, unbatched", clients))
        plain = results.get(("server, unbatched", clients))
        batched = results.get(("server, --enable_batching", clients))
        if base and plain:
            print(f"{clients} clients: server overhead at p50 {plain[1] - base[1]:+.3f} ms; "
                  f"--enable_batching throughput {batched[0] / plain[0]:.2f}x unbatched")


def _one_answer(base, x):
    """The server's answer for x, through a fresh server (checks the numbers, not speed)."""
    import grpc
    from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc

    from serving.model_server.tensor_codec import to_ndarray, to_tensor_proto
    from serving_harness import ServerProcess
    with tempfile.TemporaryDirectory() as work:
        server = ServerProcess(work, "--model_name=mlp", f"--model_base_path={base}",
                               rest=False).start()
        try:
            with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}") as channel:
                request = predict_pb2.PredictRequest()
                request.model_spec.name = "mlp"
                request.inputs["X"].CopyFrom(to_tensor_proto(x))
                response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(
                    request, timeout=60)
                return to_ndarray(response.outputs["Y"])
        finally:
            server.stop()


if __name__ == "__main__":
    main()
