"""Soak / load test of the model server (loopback only, bounded in time; `make soak`).

    python benchmarks/soak.py [--clients 64] [--seconds 60] [--json build/soak/soak.json]

Starts `python -m serving.model_server` on an affine SavedModel (y = x * scale + 1, version 1
scale 2), then runs CLIENTS threads for SECONDS, a quarter each: TF Serving gRPC Predict
(tensorflow-serving-api stubs), TF Serving REST :predict, KServe v2 REST infer (JSON) and
KServe v2 gRPC ModelInfer (tritonclient). Half-way, version 2 (scale 3) is moved into the
model's base path; the server's file-system poller loads it and unloads version 1 while the
clients keep going. Every answer is checked against the version that produced it (either
version's output is right); a wrong answer or any failure is an error, except the overload
answers (429 / RESOURCE_EXHAUSTED) which are counted apart. Reports requests, errors,
p50/p99 latency per client kind, and the server's RSS after start-up, after warm-up and at
the end. Exit status 1 if any target is missed: 0 errors, 0 failed requests across the swap,
RSS growth from warm-up to the end under 10 %.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "serving")]

import grpc  # noqa: E402
import numpy as np  # noqa: E402

KINDS = ("tfs_grpc", "tfs_rest", "v2_rest", "v2_grpc")
SCALES = {1: 2.0, 2: 3.0}
OFFSET = 1.0
WARMUP_S = 5.0


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        return int(re.search(r"VmRSS:\s+(\d+) kB", handle.read()).group(1)) * 1024


def _version_of(x: np.ndarray, y: np.ndarray):
    """The version whose output y is (None: a wrong answer)."""
    for version, scale in SCALES.items():
        if np.allclose(y, x * np.float32(scale) + np.float32(OFFSET), rtol=1e-6, atol=1e-6):
            return version
    return None


class Overloaded(Exception):
    pass


def _client(kind: str, server):
    """A function x -> y for one client thread (its own connection)."""
    if kind == "tfs_grpc":
        from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
        from serving.model_server.tensor_codec import to_ndarray, to_tensor_proto
        stub = prediction_service_pb2_grpc.PredictionServiceStub(
            grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}"))

        def call(x):
            request = predict_pb2.PredictRequest()
            request.model_spec.name = "affine"
            request.inputs["x"].CopyFrom(to_tensor_proto(x))
            try:
                return to_ndarray(stub.Predict(request, timeout=30).outputs["y"])
            except grpc.RpcError as error:
                if error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                    raise Overloaded() from None
                raise
        return call
    if kind == "v2_grpc":
        import tritonclient.grpc as triton
        from tritonclient.utils import InferenceServerException
        client = triton.InferenceServerClient(f"127.0.0.1:{server.grpc_port}")

        def call(x):
            tensor = triton.InferInput("x", list(x.shape), "FP32")
            tensor.set_data_from_numpy(x)
            try:
                return client.infer("affine", [tensor], client_timeout=30).as_numpy("y")
            except InferenceServerException as error:
                if "RESOURCE_EXHAUSTED" in str(error.status()):
                    raise Overloaded() from None
                raise
        return call
    connection = http.client.HTTPConnection("127.0.0.1", server.rest_port, timeout=30)

    def post(path, body):
        connection.request("POST", path, json.dumps(body),
                           {"Content-Type": "application/json"})
        response = connection.getresponse()
        answer = json.loads(response.read())
        if response.status == 429:
            raise Overloaded()
        if response.status != 200:
            raise RuntimeError(f"HTTP {response.status}: {answer}")
        return answer
    if kind == "tfs_rest":
        return lambda x: np.array(post("/v1/models/affine:predict",
                                       {"instances": x.tolist()})["predictions"], np.float32)

    def v2(x):
        answer = post("/v2/models/affine/infer", {"inputs": [
            {"name": "x", "datatype": "FP32", "shape": list(x.shape),
             "data": x.ravel().tolist()}]})
        (output,) = answer["outputs"]
        return np.array(output["data"], np.float32).reshape(output["shape"])
    return v2


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.latencies = {k: [] for k in KINDS}
        self.errors = {k: [] for k in KINDS}
        self.overloaded = {k: 0 for k in KINDS}
        self.versions = {}          # version -> answers
        self.swap_window = [0, 0]   # [requests, failures] while the swap happens


def _run_client(kind, index, server, stats, stop, swapping):
    call = _client(kind, server)
    rng = np.random.default_rng(index)
    while not stop.is_set():
        x = rng.standard_normal((1 + index % 4, 2)).astype(np.float32)
        in_swap = swapping.is_set()
        started = time.perf_counter()
        failed = False
        try:
            y = call(x)
            seconds = time.perf_counter() - started
            version = _version_of(x, np.asarray(y, np.float32))
            with stats.lock:
                if version is None:
                    failed = True
                    stats.errors[kind].append(f"wrong answer {y!r} for {x!r}")
                else:
                    stats.latencies[kind].append(seconds)
                    stats.versions[version] = stats.versions.get(version, 0) + 1
        except Overloaded:
            with stats.lock:
                stats.overloaded[kind] += 1
        except Exception as error:   # every failure is reported, none stops the soak
            failed = True
            with stats.lock:
                stats.errors[kind].append(f"{type(error).__name__}: {error}"[:300])
        if in_swap:
            with stats.lock:
                stats.swap_window[0] += 1
                stats.swap_window[1] += failed


def _save_version(base: str, version: int, scratch: str):
    from serving_models import save_affine
    staging = os.path.join(scratch, f"staging-{version}")
    save_affine(staging, scale=SCALES[version], offset=OFFSET)
    os.rename(staging, os.path.join(base, str(version)))   # appears whole to the poller


def _loaded_versions(server):
    status, body = server.http("GET", "/v1/models/affine")
    if status != 200:
        return {}
    return {int(row["version"]): row["state"] for row in body["model_version_status"]}


def _percentile(values, q):
    return float(np.percentile(values, q) * 1000) if values else float("nan")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--json", default=os.path.join(ROOT, "build", "soak", "soak.json"))
    args = parser.parse_args(argv)
    from serving_harness import ServerProcess, wait_until

    scratch = tempfile.mkdtemp(prefix="soak-")
    base = os.path.join(scratch, "models", "affine")
    os.makedirs(base)
    _save_version(base, 1, scratch)
    server = ServerProcess(os.path.join(scratch, "server"), "--model_name=affine",
                           f"--model_base_path={base}", "--file_system_poll_wait_seconds=1")
    server.start()
    stats, stop, swapping = Stats(), threading.Event(), threading.Event()
    try:
        rss_started = rss_bytes(server.process.pid)
        threads = [threading.Thread(target=_run_client, daemon=True,
                                    args=(KINDS[i % len(KINDS)], i, server, stats, stop,
                                          swapping)) for i in range(args.clients)]
        began = time.monotonic()
        for thread in threads:
            thread.start()
        time.sleep(WARMUP_S)
        rss_warm = rss_bytes(server.process.pid)
        time.sleep(max(args.seconds / 2 - WARMUP_S, 0))
        swapping.set()
        swap_started = time.monotonic()
        _save_version(base, 2, scratch)
        wait_until(lambda: [v for v, state in _loaded_versions(server).items()
                            if state == "AVAILABLE"] == [2], timeout_s=60,
                   what="version 2 to replace version 1")
        swap_seconds = time.monotonic() - swap_started
        swapping.clear()
        time.sleep(max(began + args.seconds - time.monotonic(), 0))
        stop.set()
        for thread in threads:
            thread.join(60)
        elapsed = time.monotonic() - began
        rss_end = rss_bytes(server.process.pid)
    finally:
        stop.set()
        code = server.stop()
        shutil.rmtree(scratch, ignore_errors=True)

    everything = [s for k in KINDS for s in stats.latencies[k]]
    report = {
        "clients": args.clients, "seconds": round(elapsed, 1),
        "requests": len(everything) + sum(len(e) for e in stats.errors.values())
        + sum(stats.overloaded.values()),
        "answered_ok": len(everything),
        "errors": sum(len(e) for e in stats.errors.values()),
        "overload_answers": sum(stats.overloaded.values()),
        "requests_per_s": round(len(everything) / elapsed, 1),
        "p50_ms": round(_percentile(everything, 50), 2),
        "p99_ms": round(_percentile(everything, 99), 2),
        "per_kind": {k: {"ok": len(stats.latencies[k]), "errors": len(stats.errors[k]),
                         "overload": stats.overloaded[k],
                         "p50_ms": round(_percentile(stats.latencies[k], 50), 2),
                         "p99_ms": round(_percentile(stats.latencies[k], 99), 2)}
                     for k in KINDS},
        "answers_by_version": stats.versions,
        "swap": {"seconds": round(swap_seconds, 2), "requests": stats.swap_window[0],
                 "failed": stats.swap_window[1]},
        "rss_mb": {"after_start": round(rss_started / 2 ** 20, 1),
                   "after_warmup": round(rss_warm / 2 ** 20, 1),
                   "end": round(rss_end / 2 ** 20, 1)},
        "rss_growth_pct": round(100.0 * (rss_end - rss_warm) / rss_warm, 2),
        "server_exit_code": code,
        "first_errors": [e for k in KINDS for e in stats.errors[k][:3]],
    }
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as handle:
        json.dump(report, handle, indent=2)
    print(json.dumps(report, indent=2))
    missed = [name for name, ok in (
        ("0 errors", report["errors"] == 0),
        ("0 failed requests across the swap", report["swap"]["failed"] == 0),
        ("both versions answered", set(stats.versions) == {1, 2}),
        ("RSS growth < 10 %", report["rss_growth_pct"] < 10.0),
        ("clean server exit", code == 0)) if not ok]
    if missed:
        print("MISSED: " + ", ".join(missed), file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
