"""Fuzz target: a serialized tensorflow.serving.PredictRequest as the gRPC API receives it,
every input decoded to numpy (tensor_codec.to_ndarray, TensorFlow's Tensor::FromProto rules)."""
import numpy as np
from google.protobuf.message import DecodeError
from tensorflow_serving.apis import predict_pb2

from serving.model_server.tensor_codec import to_ndarray, to_tensor_proto

from serving_decoders import decode_or_refuse


def check(data: bytes) -> None:
    try:
        request = predict_pb2.PredictRequest.FromString(data)
    except DecodeError:   # grpc answers INTERNAL for an unparseable message before us
        return
    for name, proto in request.inputs.items():
        decode_or_refuse(lambda: to_ndarray(proto, name))


def seed_inputs():
    arrays = {
        "f": np.arange(6, dtype=np.float32).reshape(2, 3),
        "i8": np.array([1, -2, 3], np.int8),
        "h": np.array([[0.5, 1.5]], np.float16),
        "c": np.array([1 + 2j], np.complex64),
        "s": np.array([b"ab", b""], dtype=object),
        "b": np.array([True, False]),
    }
    seeds = []
    for name, array in arrays.items():
        request = predict_pb2.PredictRequest()
        request.model_spec.name = "m"
        request.inputs[name].CopyFrom(to_tensor_proto(array))
        seeds.append(request.SerializeToString())
    typed = predict_pb2.PredictRequest()
    proto = typed.inputs["t"]
    proto.dtype = 1
    proto.tensor_shape.dim.add().size = 4
    proto.float_val.extend([1.0, 2.0])      # fewer values than the shape: the last repeats
    seeds.append(typed.SerializeToString())
    return seeds
