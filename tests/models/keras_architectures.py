"""Real architectures built offline (random weights, nothing downloaded) for the model tests and
benchmarks/bench_keras_architectures.py: Keras applications MobileNetV2 and ResNet50 with
`weights=None`, and a BERT-style encoder made of standard Keras layers; for benchmarks/bench_models.py
also EfficientNetB0, DenseNet121, ConvNeXtTiny and InceptionV3 (keras.applications, `weights=None`)
and a ViT-style encoder. Each returns logits
(no softmax), and BatchNormalization statistics are calibrated on sample data first: with
random weights and the default statistics (mean 0, variance 1) activations grow or collapse
through the depth, and MobileNetV2's softmax comes out exactly uniform, so a wrong kernel
could go unnoticed."""
import keras
import numpy as np

L = keras.layers


def calibrate_batch_norm(model, sample) -> None:
    """Sets every BatchNormalization's moving statistics to the batch statistics it sees on
    `sample` (one training-mode pass with momentum 0), so that inference on data like `sample`
    keeps unit-scale activations all the way through."""
    layers = [layer for layer in model._flatten_layers() if isinstance(layer, L.BatchNormalization)]
    momenta = [layer.momentum for layer in layers]
    for layer in layers:
        layer.momentum = 0.0
    model(sample, training=True)
    for layer, momentum in zip(layers, momenta):
        layer.momentum = momentum


def mobilenet_v2(image_size=96, alpha=0.35, classes=1000):
    return keras.applications.MobileNetV2(input_shape=(image_size, image_size, 3), alpha=alpha, weights=None,
                                          classes=classes, classifier_activation=None)


def resnet50(image_size=64, classes=1000):
    return keras.applications.ResNet50(input_shape=(image_size, image_size, 3), weights=None, classes=classes,
                                       classifier_activation=None)


def efficientnet_b0(image_size=224, classes=1000):
    return keras.applications.EfficientNetB0(input_shape=(image_size, image_size, 3), weights=None, classes=classes,
                                             classifier_activation=None)


def densenet121(image_size=224, classes=1000):
    return keras.applications.DenseNet121(input_shape=(image_size, image_size, 3), weights=None, classes=classes,
                                          classifier_activation=None)


def convnext_tiny(image_size=224, classes=1000):
    return keras.applications.ConvNeXtTiny(input_shape=(image_size, image_size, 3), weights=None, classes=classes,
                                           classifier_activation=None)


def inception_v3(image_size=299, classes=1000):
    return keras.applications.InceptionV3(input_shape=(image_size, image_size, 3), weights=None, classes=classes,
                                          classifier_activation=None)


@keras.saving.register_keras_serializable(package="tf_popef_tests")
class AddPositionEmbedding(L.Layer):
    """ViT's learned position embedding, added to the patch tokens."""

    def build(self, input_shape):
        self.positions = self.add_weight(shape=tuple(input_shape[1:]), initializer=keras.initializers.RandomNormal(0.02),
                                         name="positions")

    def call(self, tokens):
        return tokens + self.positions


def vit_encoder(image_size=224, patch=16, layers=12, hidden=192, heads=3, mlp=768, classes=1000):
    """Pre-LayerNorm vision transformer (ViT-Tiny's sizes by default): a strided-conv patch
    embedding, learned positions, encoder blocks, mean-pooled tokens into the classifier."""
    images = keras.Input((image_size, image_size, 3))
    h = L.Conv2D(hidden, patch, strides=patch)(images)
    h = AddPositionEmbedding()(L.Reshape(((image_size // patch) ** 2, hidden))(h))
    for i in range(layers):
        x = L.LayerNormalization(epsilon=1e-6)(h)
        h = L.Add()([h, L.MultiHeadAttention(heads, hidden // heads, name=f"attention_{i}")(x, x)])
        x = L.LayerNormalization(epsilon=1e-6)(h)
        h = L.Add()([h, L.Dense(hidden)(L.Dense(mlp, activation="gelu")(x))])
    pooled = L.GlobalAveragePooling1D()(L.LayerNormalization(epsilon=1e-6)(h))
    return keras.Model(images, L.Dense(classes)(pooled))


@keras.saving.register_keras_serializable(package="tf_popef_tests")
class TokenAndPositionEmbedding(L.Layer):
    """BERT's input embedding: token embedding + learned position embedding."""

    def __init__(self, vocab_size, seq_len, hidden, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size, self.seq_len, self.hidden = vocab_size, seq_len, hidden
        self.tokens = L.Embedding(vocab_size, hidden)
        self.positions = L.Embedding(seq_len, hidden)

    def call(self, ids):
        return self.tokens(ids) + self.positions(keras.ops.arange(self.seq_len))

    def get_config(self):
        return {**super().get_config(), "vocab_size": self.vocab_size, "seq_len": self.seq_len,
                "hidden": self.hidden}


def bert_encoder(layers=4, hidden=256, heads=4, seq_len=128, vocab_size=1000, intermediate=None, classes=2):
    """Post-LayerNorm transformer encoder (BERT) of Keras layers; outputs the classifier's
    logits on the first token and the last hidden states."""
    intermediate = intermediate or 4 * hidden
    ids = keras.Input((seq_len,), dtype="int32", name="input_ids")
    h = TokenAndPositionEmbedding(vocab_size, seq_len, hidden)(ids)
    h = L.LayerNormalization(epsilon=1e-12)(h)
    for i in range(layers):
        attended = L.MultiHeadAttention(heads, hidden // heads, name=f"attention_{i}")(h, h)
        h = L.LayerNormalization(epsilon=1e-12)(L.Add()([h, L.Dropout(0.1)(attended)]))
        ffn = L.Dense(hidden)(L.Dense(intermediate, activation="gelu")(h))
        h = L.LayerNormalization(epsilon=1e-12)(L.Add()([h, L.Dropout(0.1)(ffn)]))
    pooled = L.Dense(hidden, activation="tanh")(h[:, 0, :])
    return keras.Model(ids, {"logits": L.Dense(classes, name="logits")(pooled), "hidden_states": h})


def sample_images(batch, image_size, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (batch, image_size, image_size, 3)).astype(np.float32)


def sample_ids(batch, seq_len, vocab_size=1000, seed=0):
    return np.random.default_rng(seed).integers(0, vocab_size, (batch, seq_len)).astype(np.int32)
