"""Request path of the model server: where the time of a one-row request goes, and what
cross-request batching buys under concurrency.

Latency (one row, one request at a time, contenders interleaved call by call so they share
the machine's noise): `ModelRunner.execute` in process; KServe v2 gRPC ModelInfer on a bare
PopEF, on the Python listener (`--port`, grpcio) and on the native C++ one
(`--grpc_inference_port`); v2 REST with the binary tensor extension on the same model; TF Serving gRPC Predict on
the same bare PopEF and on a SavedModel exported from it (TensorFlow + PopefExecute op).
Clients are lean (pre-serialized requests on a plain grpc channel / keep-alive HTTP
connection, responses decoded to numpy), so the numbers are the server's and the transport's.
The gRPC paths are timed a second time with a native client (h2load, benchmarks/
native_grpc_client.py), in blocks alternating with blocks of in-process calls: a Python
client's own per-call cost (~0.2 ms) hides what the server adds.

The latency model is a small MLP compiled at batch 1 (the request path dominates); the
throughput model a larger one compiled at batch 16, the fixed batch of an accelerator.

Throughput: closed-loop v2 gRPC clients (1, 16, 64; spread over client processes) sending
one-row requests, through each of the two v2 gRPC listeners, to the batch-16 PopEF served
twice: `unbatched` (no `dynamic_batching` in
its config.pbtxt: every request is its own execution, zero-padded to 16 rows, as Triton runs
a model without a batcher) and `batched` (`dynamic_batching { max_queue_delay_microseconds }`:
the runtime packs rows of concurrent requests into shared executions).

    .venv/bin/python benchmarks/bench_request_path.py [--iterations 2000] [--requests 4000]
"""
import argparse
import http.client
import json
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

LATENCY_SIZES = (64, 256, 256, 16)
THROUGHPUT_SIZES = (256, 2048, 2048, 16)
BATCHED = 16
INFER = "/inference.GRPCInferenceService/ModelInfer"
PREDICT = "/tensorflow.serving.PredictionService/Predict"
IN_PROCESS = "ModelRunner.execute, in process"
V2_GRPC = "v2 gRPC ModelInfer, bare PopEF (grpcio listener)"
V2_NATIVE = "v2 gRPC ModelInfer, bare PopEF (native listener)"


def build_repository(root: str) -> dict:
    from benchmarks.mlp_model import build_mlp
    from compiler import Compiler
    from serving.export import export_saved_model
    paths = {}
    for name, sizes, batch, config in (
            ("unbatched", THROUGHPUT_SIZES, BATCHED, f"max_batch_size: {BATCHED}\n"),
            ("batched", THROUGHPUT_SIZES, BATCHED, f"max_batch_size: {BATCHED}\n"
             "dynamic_batching { max_queue_delay_microseconds: 2000 }\n"),
            ("single", LATENCY_SIZES, 1, "")):
        folder = os.path.join(root, "models", name)
        os.makedirs(os.path.join(folder, "1"))
        popef = os.path.join(folder, "1", "model.popef")
        Compiler.compile(build_mlp(batch, list(sizes)).SerializeToString(), ["Y"]).save(popef)
        if config:
            with open(os.path.join(folder, "config.pbtxt"), "w") as handle:
                handle.write(config)
        paths[name] = popef
    export_saved_model(paths["single"], os.path.join(root, "models", "savedmodel", "1"),
                       timeout_ns=0)
    config = os.path.join(root, "models.config")
    with open(config, "w") as handle:
        handle.write("model_config_list {\n" + "".join(
            f'  config {{ name: "{m}" base_path: "{root}/models/{m}" '
            'model_platform: "tensorflow" }\n'
            for m in ("unbatched", "batched", "single", "savedmodel")) + "}\n")
    return dict(paths, config=config)


def infer_request(model: str, x: np.ndarray) -> bytes:
    from serving.protos.triton import grpc_service_pb2 as pb
    request = pb.ModelInferRequest(model_name=model)
    request.inputs.add(name="X", datatype="FP32", shape=list(x.shape))
    request.raw_input_contents.append(x.tobytes())
    return request.SerializeToString()


def predict_request(model: str, x: np.ndarray) -> bytes:
    from tensorflow_serving.apis import predict_pb2
    from serving.model_server.tensor_codec import to_tensor_proto
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.inputs["X"].CopyFrom(to_tensor_proto(x))
    return request.SerializeToString()


class V2Rest:
    """One keep-alive connection; binary request and response tensors."""

    def __init__(self, port: int, model: str, x: np.ndarray):
        self.connection = http.client.HTTPConnection("127.0.0.1", port)
        header = json.dumps({"inputs": [{"name": "X", "datatype": "FP32", "shape": list(x.shape),
                                         "parameters": {"binary_data_size": x.nbytes}}],
                             "outputs": [{"name": "Y", "parameters": {"binary_data": True}}]}
                            ).encode()
        self.body = header + x.tobytes()
        self.headers = {"Inference-Header-Content-Length": str(len(header)),
                        "Content-Type": "application/octet-stream"}
        self.path = f"/v2/models/{model}/infer"

    def __call__(self):
        self.connection.request("POST", self.path, self.body, self.headers)
        response = self.connection.getresponse()
        raw = response.read()
        length = int(response.getheader("Inference-Header-Content-Length"))
        json.loads(raw[:length])
        return np.frombuffer(raw, np.float32, offset=length)


def print_latency(latency: dict) -> None:
    base = latency[IN_PROCESS]["median_ms"]
    print("| path | p50 ms | p90 ms | p99 ms | p50 over in-process ms |")
    print("|---|---:|---:|---:|---:|")
    for name, row in latency.items():
        print(f"| {name} | {row['median_ms']:.3f} | {row['p90_ms']:.3f} | {row['p99_ms']:.3f} | "
              f"{row['median_ms'] - base:+.3f} |")


def ok_requests(server) -> dict:
    """The server's `:tensorflow:serving:request_count{status="OK"}` per model (both protocols
    count there)."""
    from prometheus_client.parser import text_string_to_metric_families
    status, text = server.http("GET", "/metrics")
    assert status == 200, text
    counts = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            # The parser names a counter's sample `<family>_total`.
            if family.name == ":tensorflow:serving:request_count" and \
                    sample.labels.get("status") == "OK":
                counts[sample.labels["model_name"]] = sample.value
    return counts


def native_latency(server, runner, x, iterations, rounds, calls) -> dict:
    """p50/p90/p99 of the gRPC `calls` ({name: (port, method, request bytes)}) sent by h2load, in
    blocks alternating with blocks of in-process `runner.execute` calls; None without h2load.
    The outcome of every h2load request is checked with the server's OK counters (h2load
    itself sees only HTTP 200)."""
    from benchmarks.interleaved_timing import block_schedule, summary
    from benchmarks.native_grpc_client import H2LoadUnary
    try:
        clients = {name: H2LoadUnary(port, method, request)
                   for name, (port, method, request) in calls.items()}
    except RuntimeError as error:
        print(f"== native-client latency not measured: {error}", flush=True)
        return None
    per_block = max(1, iterations // rounds)
    discard = max(1, per_block // 10)   # each block starts on a new connection, cold caches
    print(f"== latency, native client: {rounds} rounds of {per_block}-call blocks", flush=True)
    samples = {name: [] for name in [IN_PROCESS, *clients]}
    sent = 0
    try:
        before = ok_requests(server)
        for name, count in block_schedule(list(samples), per_block + discard, rounds):
            if name == IN_PROCESS:
                for i in range(count):
                    t0 = time.perf_counter()
                    runner.execute({"X": x})
                    if i >= discard:
                        samples[name].append(time.perf_counter() - t0)
            else:
                samples[name] += clients[name].block(count)[discard:]
                sent += count
        after = ok_requests(server)
    finally:
        for client in clients.values():
            client.close()
    answered = sum(after.get(m, 0) - before.get(m, 0) for m in ("single", "savedmodel"))
    if answered != sent:
        raise RuntimeError(f"h2load sent {sent} requests but the server answered {answered} OK")
    return {name: summary(s) for name, s in samples.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=2000,
                        help="latency samples per contender")
    parser.add_argument("--requests", type=int, default=4000,
                        help="requests per throughput measurement")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--client_processes", type=int, default=4)
    parser.add_argument("--native_rounds", type=int, default=5,
                        help="rounds of alternating blocks for the native-client latency")
    parser.add_argument("--repeats", type=int, default=2,
                        help="throughput rows measured this many times, interleaved; best kept")
    args = parser.parse_args()

    import grpc
    from benchmarks.interleaved_timing import interleaved, summary
    from benchmarks.load_generator import ClosedLoopLoad, raw_unary_caller, summarize
    from serving.model_server.tensor_codec import to_ndarray
    from serving.protos.triton import grpc_service_pb2 as pb
    from serving_harness import ServerProcess, free_port
    from tensorflow_serving.apis import predict_pb2
    from tf_popef_op import runtime

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, LATENCY_SIZES[0])).astype(np.float32)
    x_big = rng.standard_normal((1, THROUGHPUT_SIZES[0])).astype(np.float32)
    with tempfile.TemporaryDirectory() as root:
        print(f"== compiling MLPs {list(LATENCY_SIZES)} (batch 1), {list(THROUGHPUT_SIZES)} "
              f"(batch {BATCHED}), exporting", flush=True)
        repo = build_repository(root)
        monitoring = os.path.join(root, "monitoring.config")
        with open(monitoring, "w") as handle:
            handle.write('prometheus_config { enable: true path: "/metrics" }\n')
        server = ServerProcess(os.path.join(root, "server"),
                               f"--model_config_file={repo['config']}",
                               f"--monitoring_config_file={monitoring}",
                               "--grpc_max_threads=64",
                               f"--grpc_inference_port={free_port()}").start()
        ports = {"grpcio": server.grpc_port, "native": server.grpc_inference_port}
        try:
            config = runtime.RuntimeConfig()
            config.batching_dim, config.timeout_ns = 0, 0
            runner = runtime.ModelRunner(repo["single"], config)
            channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}")
            native_channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_inference_port}")
            infer = channel.unary_unary(INFER)
            native_infer = native_channel.unary_unary(INFER)
            predict = channel.unary_unary(PREDICT)
            v2_bytes = infer_request("single", x)
            popef_predict = predict_request("single", x)
            sm_predict = predict_request("savedmodel", x)

            def v2_grpc(stub):
                response = pb.ModelInferResponse.FromString(stub(v2_bytes, timeout=60))
                return np.frombuffer(response.raw_output_contents[0], np.float32)

            def tf_predict(request):
                response = predict_pb2.PredictResponse.FromString(predict(request, timeout=60))
                return to_ndarray(response.outputs["Y"])

            contenders = {
                IN_PROCESS: lambda: runner.execute({"X": x})["Y"],
                V2_GRPC: lambda: v2_grpc(infer),
                V2_NATIVE: lambda: v2_grpc(native_infer),
                "v2 REST binary, bare PopEF": V2Rest(server.rest_port, "single", x),
                "TF Serving gRPC Predict, bare PopEF": lambda: tf_predict(popef_predict),
                "TF Serving gRPC Predict, SavedModel": lambda: tf_predict(sm_predict),
            }
            reference = runner.execute({"X": x})["Y"].reshape(-1)
            for name, call in contenders.items():
                np.testing.assert_allclose(np.asarray(call()).reshape(-1), reference,
                                           rtol=1e-5, err_msg=name)
            print(f"== latency: {args.iterations} interleaved one-row calls each", flush=True)
            samples = interleaved(contenders, warmup=200, min_iters=args.iterations,
                                  max_iters=args.iterations, budget_s=0, gap_s=0.001)
            latency = {name: summary(s) for name, s in samples.items()}
            channel.close()
            native_channel.close()
            native = native_latency(
                server, runner, x, args.iterations, args.native_rounds,
                {V2_GRPC: (server.grpc_port, INFER, v2_bytes),
                 V2_NATIVE: (server.grpc_inference_port, INFER, v2_bytes),
                 "TF Serving gRPC Predict, bare PopEF": (server.grpc_port, PREDICT, popef_predict),
                 "TF Serving gRPC Predict, SavedModel": (server.grpc_port, PREDICT, sm_predict)})
            runner.close()

            print("== throughput", flush=True)
            throughput = {}
            loads = {(m, listener): ClosedLoopLoad(raw_unary_caller,
                                                   (port, INFER, infer_request(m, x_big)),
                                                   args.client_processes)
                     for listener, port in ports.items() for m in ("unbatched", "batched")}
            try:
                for _ in range(args.repeats):
                    for clients in args.clients:
                        for (model, listener), load in loads.items():
                            row = summarize(*load.run(clients, args.requests))
                            print(f"{model:10s} {listener:6s} clients {clients:3d}: "
                                  f"{row[0]:7.0f} req/s  p50 {row[1]:7.3f} ms  "
                                  f"p99 {row[2]:7.3f} ms", flush=True)
                            best = throughput.get((model, listener, clients))
                            if best is None or row[0] > best[0]:
                                throughput[(model, listener, clients)] = row
            finally:
                for load in loads.values():
                    load.close()
        finally:
            server.stop()

    print(f"\nOne-row requests; latency MLP {list(LATENCY_SIZES)} at batch 1, throughput MLP "
          f"{list(THROUGHPUT_SIZES)} at batch {BATCHED}; "
          f"{platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}, "
          f"{time.strftime('%Y-%m-%d %H:%M')}\n")
    print_latency(latency)
    if native:
        print("\nNative client (h2load), alternating blocks with the in-process call:\n")
        print_latency(native)
    print("\n| model | v2 gRPC listener | clients | throughput req/s | p50 ms | p99 ms |")
    print("|---|---|---:|---:|---:|---:|")
    for (model, listener, clients), (rps, p50, p99) in sorted(
            throughput.items(), key=lambda kv: (kv[0][2], kv[0][1], kv[0][0])):
        print(f"| {model} | {listener} | {clients} | {rps:.0f} | {p50:.3f} | {p99:.3f} |")
    print()
    for listener in ports:
        for clients in args.clients:
            batched = throughput.get(("batched", listener, clients))
            plain = throughput.get(("unbatched", listener, clients))
            if batched and plain:
                print(f"{listener}, {clients} clients: batched {batched[0] / plain[0]:.2f}x the "
                      "unbatched throughput")


if __name__ == "__main__":
    main()
