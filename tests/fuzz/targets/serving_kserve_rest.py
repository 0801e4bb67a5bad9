"""Fuzz target: the KServe v2 REST infer decoder (kserve_rest.decode_request): a JSON body, or
with the binary tensor data extension a JSON header followed by raw tensors. The input's
first 4 bytes are the Inference-Header-Content-Length (little-endian; 0xFFFFFFFF: no header)."""
import json
import struct

import numpy as np

from serving.model_server.kserve_rest import decode_request

from serving_decoders import decode_or_refuse

_NO_HEADER = 0xFFFFFFFF


def check(data: bytes) -> None:
    if len(data) < 4:
        return
    (length,) = struct.unpack_from("<I", data)
    body = data[4:]
    decode_or_refuse(lambda: decode_request(body, None if length == _NO_HEADER else str(length)))


def _binary(inputs, arrays):
    header = json.dumps({"inputs": inputs}).encode()
    return struct.pack("<I", len(header)) + header + b"".join(arrays)


def seed_inputs():
    json_body = json.dumps({"inputs": [
        {"name": "x", "datatype": "FP32", "shape": [2, 2], "data": [[1.0, 2.0], [3.0, 4.0]]},
        {"name": "s", "datatype": "BYTES", "shape": [1], "data": ["hi"]},
        {"name": "b", "datatype": "BOOL", "shape": [2], "data": [True, False]}],
        "outputs": [{"name": "y", "parameters": {"binary_data": True}}]}).encode()
    x = np.arange(4, dtype=np.float32)
    words = struct.pack("<I", 2) + b"ab" + struct.pack("<I", 0)
    return [struct.pack("<I", _NO_HEADER) + json_body,
            _binary([{"name": "x", "datatype": "FP32", "shape": [4],
                      "parameters": {"binary_data_size": 16}},
                     {"name": "w", "datatype": "BYTES", "shape": [2],
                      "parameters": {"binary_data_size": len(words)}}], [x.tobytes(), words])]
