"""End-to-end demo: three ONNX models -> one fused PopEF (YAML config) -> SavedModel ->
popef-model-server -> a gRPC PredictRequest and a REST predict per model, printed next to the
original models' outputs (onnxruntime) -> server stopped.

    cd examples/serving_demo && ../../.venv/bin/python run_demo.py      (make demo runs it)
    run_demo.py --work_dir DIR        (models, PopEF and server log go to DIR, default ./work)
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "examples", "model_fusion"))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import onnx  # noqa: E402
import onnxruntime  # noqa: E402
from compile import create_model0, create_model1  # noqa: E402  (the seeds' fusion models)

from benchmarks.mlp_model import build_mlp  # noqa: E402

WORK = os.path.join(HERE, "work")
CONFIG = """output_dir: '{work}'
output_model: 'executable'
export_popef: True
max_tensor_size: -1
model_fusion:
  - name: adder
    input_model: '{work}/adder.onnx'
    input_shape: ['X=1,2', 'Y=1,2']
    precision: 'fp32'
  - name: concat
    input_model: '{work}/concat.onnx'
    input_shape: ['X=1,1']
    precision: 'fp16'
  - name: classifier
    input_model: '{work}/classifier.onnx'
    input_shape: ['X=4,16']
    precision: 'fp32'
"""


def step(message):
    print(f"\n== {message}", flush=True)


def run(*command):
    subprocess.run(command, check=True, cwd=ROOT)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def onnx_outputs(path, feeds):
    model = onnx.load(path)
    model.ir_version = 8   # onnxruntime 1.31 reads IR <= 13; onnx 1.23 writes 14
    session = onnxruntime.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def start_server(base_path):
    port_file = os.path.join(WORK, "ports.json")
    if os.path.exists(port_file):
        os.remove(port_file)
    rest_port = free_port()
    log = open(os.path.join(WORK, "server.log"), "wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "serving.model_server", "--model_name=fused",
         f"--model_base_path={base_path}", "--port=0", f"--rest_api_port={rest_port}",
         "--bind_address=127.0.0.1", f"--port_file={port_file}",
         "--enable_grpc_healthcheck_service"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while not os.path.exists(port_file):
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            sys.exit("the server did not start; see " + log.name)
        time.sleep(0.1)
    with open(port_file) as handle:
        ports = json.load(handle)
    return process, ports["grpc_port"], rest_port


def main(argv=None):
    global WORK
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work_dir", default=WORK,
                        help="where the models, the PopEF and the server log go (emptied first)")
    WORK = os.path.abspath(parser.parse_args(argv).work_dir)
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    step("building three ONNX models: adder (fp32 Add+Reshape), concat (fp16 Concat), "
         "classifier (MLP 16-32-3 + Softmax, batch 4)")
    onnx.save(create_model0(11), os.path.join(WORK, "adder.onnx"))
    onnx.save(create_model1(11), os.path.join(WORK, "concat.onnx"))
    onnx.save(build_mlp(4, [16, 32, 3], seed=7), os.path.join(WORK, "classifier.onnx"))

    step("fusing them into one PopEF with a YAML config (popef-compile --config_yaml)")
    config = os.path.join(WORK, "config.yaml")
    with open(config, "w") as handle:
        handle.write(CONFIG.format(work=WORK))
    run(sys.executable, "-m", "compiler.cli", "--config_yaml", config)

    step("exporting the SavedModel to models/fused/1 (one signature per subgraph)")
    base_path = os.path.join(WORK, "models", "fused")
    run(sys.executable, "-m", "serving.export", os.path.join(WORK, "executable.popef"),
        os.path.join(base_path, "1"))

    step("starting popef-model-server on free local ports")
    process, grpc_port, rest_port = start_server(base_path)
    print(f"gRPC 127.0.0.1:{grpc_port}, REST http://127.0.0.1:{rest_port}")
    try:
        from serving.client import GrpcClient, RestClient
        rng = np.random.default_rng(0)
        cases = [
            ("adder", {"X": np.array([[1, 2]], np.float32), "Y": np.array([[2, 1]], np.float32)}),
            ("concat", {"X": np.array([[0.5]], np.float16)}),
            ("classifier", {"X": 4 * rng.standard_normal((3, 16)).astype(np.float32)}),
        ]
        grpc_client, rest_client = GrpcClient(f"127.0.0.1:{grpc_port}"), RestClient(
            f"http://127.0.0.1:{rest_port}")
        for name, feeds in cases:
            step(f"model '{name}'")
            original = onnx_outputs(os.path.join(WORK, f"{name}.onnx"),
                                    _onnx_feeds(name, feeds))
            if name == "classifier":
                original = original[:len(feeds["X"])]   # drop the oracle's padding rows
            output = "Y" if name == "classifier" else "O"
            by_grpc = grpc_client.predict("fused", feeds, signature=name)[output]
            by_rest = rest_client.predict("fused", signature=name, inputs={
                k: v.tolist() for k, v in feeds.items()})["outputs"]
            print(f"  original (onnxruntime): {_show(original)}")
            print(f"  gRPC PredictRequest:    {_show(by_grpc)}")
            print(f"  REST :predict:          {_show(by_rest)}")
            tolerance = 1e-2 if by_grpc.dtype == np.float16 else 1e-5
            np.testing.assert_allclose(by_grpc, original, rtol=tolerance, atol=tolerance)
            np.testing.assert_allclose(np.asarray(by_rest, np.float32), original, rtol=tolerance,
                                       atol=tolerance)
        grpc_client.close()
    finally:
        step("stopping the server (SIGTERM)")
        process.send_signal(signal.SIGTERM)
        code = process.wait(60)
        print(f"server exited with {code}")
    print("\nall answers match the original models")
    return 0 if code == 0 else 1


def _show(values):
    return np.round(np.asarray(values, np.float64), 4).tolist()


def _onnx_feeds(name, feeds):
    if name == "classifier":
        # The ONNX classifier has a fixed batch of 4; pad, run, cut (the runtime does the same).
        x = feeds["X"]
        padded = np.concatenate([x, np.zeros((4 - len(x), x.shape[1]), x.dtype)])
        return {"X": padded}
    return feeds


if __name__ == "__main__":
    sys.exit(main())
