"""TensorProto <-> numpy, the one conversion every protocol path goes through."""
import numpy as np


def to_ndarray(proto) -> np.ndarray:
    import tensorflow as tf
    try:
        return tf.make_ndarray(proto)
    except (TypeError, ValueError) as error:
        from serving.model_server.errors import invalid_argument
        raise invalid_argument(f"malformed TensorProto: {error}") from None


def to_tensor_proto(array):
    import tensorflow as tf
    return tf.make_tensor_proto(np.asarray(array))
