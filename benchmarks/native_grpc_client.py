"""A native (C) gRPC client for latency measurements: nghttp2's `h2load` sending one
pre-serialized unary request over and over on one HTTP/2 connection, one at a time.

Why: a Python grpcio client spends about 0.2 ms of its own per call on this machine (an empty
RPC costs 0.45 ms p50 with a Python client and server, 0.25 ms with h2load and the same server),
so a Python client cannot tell what the server adds. Triton measures its own request path with
a C++ client (perf_analyzer) for the same reason.

h2load sees only HTTP status codes, and a gRPC error travels as HTTP 200 with a `grpc-status`
trailer: callers must check the outcome elsewhere (bench_request_path compares the server's
own request counters before and after).

Install: `apt-get install nghttp2-client` (Debian/Ubuntu).
"""
import os
import shutil
import struct
import subprocess
import tempfile
from typing import List


def h2load_path() -> str:
    path = shutil.which("h2load")
    if path is None:
        raise RuntimeError("h2load not found: install it with `apt-get install nghttp2-client` "
                           "to measure the request path with a native client")
    return path


class H2LoadUnary:
    """Times one gRPC unary method with h2load: `block(n)` sends n requests one after another
    (one connection, one stream at a time) and returns each request's seconds, from h2load's
    per-request log (time from sending the request to the end of the response)."""

    def __init__(self, port: int, method: str, request: bytes):
        self.binary = h2load_path()
        self.folder = tempfile.mkdtemp(prefix="h2load-")
        self.body = os.path.join(self.folder, "request.bin")
        with open(self.body, "wb") as handle:
            # gRPC length-prefixed message: no compression flag, 4-byte big-endian length.
            handle.write(b"\0" + struct.pack(">I", len(request)) + request)
        self.url = f"http://127.0.0.1:{port}{method}"

    def block(self, requests: int) -> List[float]:
        log = os.path.join(self.folder, "log.tsv")
        result = subprocess.run(
            [self.binary, "-n", str(requests), "-c", "1", "-m", "1", "-d", self.body,
             "-H", "content-type: application/grpc", "-H", "te: trailers",
             "--log-file", log, self.url], capture_output=True, text=True)
        if result.returncode != 0 or f"{requests} succeeded" not in result.stdout:
            raise RuntimeError(f"h2load against {self.url} failed:\n{result.stdout}{result.stderr}")
        with open(log) as handle:
            # Columns: start time (µs since epoch), HTTP status, µs to the end of the response.
            return [int(line.split("\t")[2]) * 1e-6 for line in handle if line.strip()]

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
