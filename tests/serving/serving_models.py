"""Small TF SavedModels for server tests (the server is model-agnostic; PopEF SavedModels go
through the same path with the op loaded)."""
import tensorflow as tf


class AffineModule(tf.Module):
    """serving_default: y = x * scale + offset (float [-1,2]); strings: string lengths and
    row sums, two inputs and two outputs; also a `_bytes` output echoed as binary."""

    def __init__(self, scale: float, offset: float):
        super().__init__()
        self.scale = tf.Variable(scale, dtype=tf.float32)
        self.offset = tf.constant(offset, tf.float32)

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="x")])
    def affine(self, x):
        return {"y": x * self.scale + self.offset}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text"),
                                  tf.TensorSpec([None, 3], tf.int32, name="numbers")])
    def two_io(self, text, numbers):
        return {"length": tf.strings.length(text), "total": tf.reduce_sum(numbers, axis=1),
                "echo_bytes": text}

    @tf.function(input_signature=[tf.TensorSpec([None, 2], tf.float32, name="x")])
    def slow(self, x):
        # Sleeps 0.3 s inside the graph (tf.data's sleep is a real op, saved with the
        # model): keeps requests in flight for drain and swap tests.
        dataset = tf.data.Dataset.from_tensors(x)
        variant = tf.raw_ops.SleepDataset(
            input_dataset=dataset._variant_tensor, sleep_microseconds=300_000,
            output_types=[tf.float32], output_shapes=[tf.TensorShape([None, 2])])
        delayed = tf.data.experimental.from_variant(variant, dataset.element_spec)
        return {"y": delayed.get_single_element() * self.scale + self.offset}


def save_affine(path: str, scale: float = 2.0, offset: float = 1.0) -> str:
    module = AffineModule(scale, offset)
    tf.saved_model.save(module, path, signatures={
        "serving_default": module.affine,
        "two_io": module.two_io,
        "slow": module.slow,
    })
    return path


def expected_affine(x, scale=2.0, offset=1.0):
    import numpy as np
    return (np.asarray(x, np.float32) * np.float32(scale) + np.float32(offset))


def save_tf1_classify_regress(path: str) -> str:
    """A TF1 SavedModel (SavedModelBuilder) with classify, regress and predict signatures over
    tf.Examples holding a float feature `x`: regress y = 0.5 x + 2 (half_plus_two); classify
    labels ("low", "high") with scores (y, -y)."""
    with tf.Graph().as_default() as graph:
        serialized = tf.compat.v1.placeholder(tf.string, [None], name="tf_example")
        features = tf.io.parse_example(serialized, {"x": tf.io.FixedLenFeature([1], tf.float32)})
        y = 0.5 * features["x"] + 2.0
        scores = tf.concat([y, -y], axis=1)
        classes = tf.tile(tf.constant([["low", "high"]]), [tf.shape(y)[0], 1])
        raw_x = tf.compat.v1.placeholder(tf.float32, [None, 1], name="x")
        signatures = {
            "classify": tf.compat.v1.saved_model.classification_signature_def(
                serialized, classes, scores),
            "serving_default": tf.compat.v1.saved_model.regression_signature_def(serialized, y),
            "predict": tf.compat.v1.saved_model.predict_signature_def(
                {"x": raw_x}, {"y": 0.5 * raw_x + 2.0}),
        }
        with tf.compat.v1.Session(graph=graph) as session:
            builder = tf.compat.v1.saved_model.Builder(path)
            builder.add_meta_graph_and_variables(session, ["serve"],
                                                 signature_def_map=signatures)
            builder.save()
    return path
