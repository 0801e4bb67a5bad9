"""Starts `python -m serving.model_server` in a subprocess on free 127.0.0.1 ports and stops
it; every wait is bounded and the log is attached to any failure."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import grpc

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
START_TIMEOUT_S = 90


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    def __init__(self, workdir, *flags, rest=True, env=None):
        self.workdir = str(workdir)
        os.makedirs(self.workdir, exist_ok=True)
        self.port_file = os.path.join(self.workdir, "ports.json")
        self.log_path = os.path.join(self.workdir, "server.log")
        if os.path.exists(self.port_file):
            os.remove(self.port_file)
        self.rest_port = free_port() if rest else 0
        self.args = [sys.executable, "-m", "serving.model_server", "--port=0",
                     f"--rest_api_port={self.rest_port}", "--bind_address=127.0.0.1",
                     f"--port_file={self.port_file}", *flags]
        self.env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO, **(env or {}))
        self.process = None
        self.grpc_port = None
        self.grpc_inference_port = 0
        self._channel = None

    def start(self):
        self._log = open(self.log_path, "wb")
        self.process = subprocess.Popen(self.args, stdout=self._log, stderr=subprocess.STDOUT,
                                        cwd=REPO, env=self.env)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not os.path.exists(self.port_file):
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"server did not start in {START_TIMEOUT_S} s:\n{self.log()}")
            time.sleep(0.1)
        with open(self.port_file, encoding="utf-8") as handle:
            ports = json.load(handle)
        self.grpc_port = ports["grpc_port"]
        self.grpc_inference_port = ports.get("grpc_inference_port", 0)
        return self

    def log(self) -> str:
        with open(self.log_path, "rb") as handle:
            return handle.read().decode("utf-8", errors="replace")

    @property
    def channel(self):
        if self._channel is None:
            self._channel = grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}")
        return self._channel

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.rest_port}{path}"

    def http(self, method: str, path: str, body=None, timeout=30):
        """(status, parsed JSON body); body may be a dict (sent as JSON) or raw bytes."""
        data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        request = urllib.request.Request(self.url(path), data=data, method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, _json_or_text(response.read())
        except urllib.error.HTTPError as error:
            return error.code, _json_or_text(error.read())

    def stop(self, timeout=60) -> int:
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise RuntimeError(f"server ignored SIGTERM for {timeout} s:\n{self.log()}")
        finally:
            self._log.close()

    def kill(self):
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def _json_or_text(raw: bytes):
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", errors="replace")


def wait_until(predicate, timeout_s=60, interval_s=0.1, what="condition"):
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)
