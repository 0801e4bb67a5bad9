"""Fuzz target: TF Serving's REST JSON decoder (rest_json): a :predict body against a
signature with a float, an int and a string input, then each input as a TensorProto, and a
:classify/:regress body as tf.Examples."""
import json

import tensorflow as tf

from serving.model_server import rest_json
from serving.model_server.tensor_codec import to_tensor_proto

from serving_decoders import decode_or_refuse

_DTYPES = {"x": tf.float32, "n": tf.int64, "s": tf.string}
_ONE_INPUT = {"x": tf.float32}


def check(data: bytes) -> None:
    def predict(dtypes):
        body = rest_json.parse_body(data)
        inputs, _ = rest_json.inputs_from_body(body, dtypes)
        for array in inputs.values():
            to_tensor_proto(array)

    def examples():
        rest_json.examples_input(rest_json.parse_body(data)).SerializeToString()
    decode_or_refuse(lambda: predict(_DTYPES))
    decode_or_refuse(lambda: predict(_ONE_INPUT))
    decode_or_refuse(examples)


def seed_inputs():
    bodies = [
        {"instances": [[1.0, 2.0], [3.0, 4.0]]},
        {"inputs": [[1.5, -2.0]]},
        {"signature_name": "", "instances": [{"x": [1.0], "n": 3, "s": "a"},
                                             {"x": [2.0], "n": 4, "s": {"b64": "YWJj"}}]},
        {"inputs": {"x": [[1.0]], "n": [[7]], "s": [["t"]]}},
        {"examples": [{"f": 1.0, "g": ["a", "b"], "h": 3}], "context": {"c": [1, 2]}},
    ]
    return [json.dumps(b).encode() for b in bodies]
