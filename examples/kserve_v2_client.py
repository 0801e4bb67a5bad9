"""Query a model served by `python -m serving.model_server` with Triton's own client, over the
KServe v2 protocol (HTTP/REST and gRPC): server health, the model's metadata, then one
inference with random inputs shaped from that metadata, through both protocols.

    pip install tritonclient[http,grpc]
    python -m serving.model_server --model_config_file=models.config --port=8500 \\
        --rest_api_port=8501 &
    python examples/kserve_v2_client.py --model mlp --http localhost:8501 --grpc localhost:8500

A fused PopEF's subgraphs are separate models `<model>/<subgraph>` (e.g. `fused/adder`).
"""
import argparse

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import triton_to_np_dtype

ROWS = 2   # rows sent along a variable (-1) dimension


def random_inputs(metadata, module):
    """One InferInput of `module` (tritonclient.http or .grpc) per model input."""
    rng = np.random.default_rng(0)
    inputs, arrays = [], {}
    for tensor in metadata["inputs"]:
        shape = [ROWS if int(d) < 0 else int(d) for d in tensor["shape"]]
        if tensor["datatype"] == "BYTES":
            array = np.array([b"example"] * int(np.prod(shape)), dtype=object).reshape(shape)
        else:
            array = (rng.standard_normal(shape) * 4).astype(triton_to_np_dtype(
                tensor["datatype"]))
        infer_input = module.InferInput(tensor["name"], shape, tensor["datatype"])
        infer_input.set_data_from_numpy(array)
        inputs.append(infer_input)
        arrays[tensor["name"]] = array
    return inputs, arrays


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--version", default="", help="model version (default: latest)")
    parser.add_argument("--http", default="localhost:8501", help="REST host:port")
    parser.add_argument("--grpc", default="localhost:8500", help="gRPC host:port")
    args = parser.parse_args()

    http = httpclient.InferenceServerClient(args.http)
    grpc = grpcclient.InferenceServerClient(args.grpc)
    print("server live/ready (HTTP):", http.is_server_live(), http.is_server_ready())
    print("server live/ready (gRPC):", grpc.is_server_live(), grpc.is_server_ready())
    print("server:", http.get_server_metadata())
    metadata = http.get_model_metadata(args.model, args.version)
    print("model:", metadata)

    inputs, arrays = random_inputs(metadata, httpclient)
    outputs = [httpclient.InferRequestedOutput(t["name"], binary_data=True)
               for t in metadata["outputs"]]
    result = http.infer(args.model, inputs, model_version=args.version, outputs=outputs)
    for tensor in metadata["outputs"]:
        print(f"HTTP  {tensor['name']}: {result.as_numpy(tensor['name'])}")

    inputs, _ = random_inputs(metadata, grpcclient)
    result = grpc.infer(args.model, inputs, model_version=args.version)
    for tensor in metadata["outputs"]:
        print(f"gRPC  {tensor['name']}: {result.as_numpy(tensor['name'])}")
    print("inputs:", {name: array.shape for name, array in arrays.items()})


if __name__ == "__main__":
    main()
