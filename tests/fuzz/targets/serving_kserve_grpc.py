"""Fuzz target: a serialized KServe v2 gRPC ModelInferRequest decoded as ModelInfer does
(kserve_grpc.decode_inputs): typed `contents` or `raw_input_contents`."""
import struct

import numpy as np
from google.protobuf.message import DecodeError

from serving.model_server.kserve_grpc import decode_inputs
from serving.protos.triton import grpc_service_pb2 as pb

from serving_decoders import decode_or_refuse


def check(data: bytes) -> None:
    try:
        request = pb.ModelInferRequest.FromString(data)
    except DecodeError:   # grpc answers INTERNAL for an unparseable message before us
        return
    decode_or_refuse(lambda: decode_inputs(request))


def seed_inputs():
    typed = pb.ModelInferRequest(model_name="m")
    tensor = typed.inputs.add(name="x", datatype="FP32", shape=[2])
    tensor.contents.fp32_contents.extend([1.0, 2.0])
    words = typed.inputs.add(name="s", datatype="BYTES", shape=[1])
    words.contents.bytes_contents.append(b"hi")
    raw = pb.ModelInferRequest(model_name="m")
    raw.inputs.add(name="x", datatype="INT64", shape=[1, 3])
    raw.raw_input_contents.append(np.arange(3, dtype=np.int64).tobytes())
    raw.inputs.add(name="w", datatype="BYTES", shape=[1])
    raw.raw_input_contents.append(struct.pack("<I", 3) + b"abc")
    return [typed.SerializeToString(), raw.SerializeToString()]
