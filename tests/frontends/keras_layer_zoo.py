"""One tiny Keras model per standard layer (and per variant that takes its own path: strides,
dilations, groups, padding, every activation...), each small enough to export and compile in
about a second. LAYERS maps a test id to (builder, input shape without batch, input dtype)."""
import keras
import numpy as np

L = keras.layers


@keras.saving.register_keras_serializable(package="tf_popef_tests")
def gelu_tanh(x):
    """Keras's tanh-approximate gelu (Activation("gelu") is the exact, erf form)."""
    return keras.activations.gelu(x, approximate=True)


def sequential(shape, dtype, *layers):
    inputs = keras.Input(shape, name="x", dtype=dtype)
    h = inputs
    for layer in layers:
        h = layer(h)
    return keras.Model(inputs, h)


def batch_norm_with_statistics(channels):
    """BatchNormalization whose moving statistics are not the identity, so the test sees them."""
    layer = L.BatchNormalization()
    layer.build((None, None, None, channels))
    rng = np.random.default_rng(3)
    layer.set_weights([rng.uniform(0.5, 1.5, channels), rng.normal(0, 0.5, channels),
                       rng.normal(0, 0.5, channels), rng.uniform(0.5, 2.0, channels)])
    return layer


def two_input(op):
    a = keras.Input((4, 6), name="x")
    b = L.Dense(6, name="other")(a)
    return keras.Model(a, op([a, b]))


def attention():
    x = keras.Input((8, 16), name="x")
    return keras.Model(x, L.MultiHeadAttention(num_heads=2, key_dim=8)(x, x))


def embedding_then_dense():
    ids = keras.Input((6,), name="x", dtype="int32")
    return keras.Model(ids, L.Dense(3)(L.Embedding(20, 4)(ids)))


F = "float32"
LAYERS = {
    "dense": (lambda: sequential((6,), F, L.Dense(5)), (6,), F),
    "conv1d_same_stride2": (lambda: sequential((12, 3), F, L.Conv1D(4, 3, strides=2, padding="same")), (12, 3), F),
    "conv1d_valid_dilated": (lambda: sequential((12, 3), F, L.Conv1D(4, 3, dilation_rate=2)), (12, 3), F),
    "conv2d_same": (lambda: sequential((9, 9, 3), F, L.Conv2D(4, 3, padding="same")), (9, 9, 3), F),
    "conv2d_valid_stride2": (lambda: sequential((9, 9, 3), F, L.Conv2D(4, 3, strides=2)), (9, 9, 3), F),
    "conv2d_dilated": (lambda: sequential((9, 9, 3), F, L.Conv2D(4, 3, dilation_rate=2, padding="same")),
                       (9, 9, 3), F),
    "conv2d_groups": (lambda: sequential((8, 8, 4), F, L.Conv2D(6, 3, groups=2, padding="same")), (8, 8, 4), F),
    "depthwise_conv2d": (lambda: sequential((8, 8, 3), F, L.DepthwiseConv2D(3, depth_multiplier=2, padding="same")),
                         (8, 8, 3), F),
    "separable_conv2d": (lambda: sequential((8, 8, 3), F, L.SeparableConv2D(5, 3)), (8, 8, 3), F),
    "conv2d_transpose": (lambda: sequential((5, 5, 3), F, L.Conv2DTranspose(4, 3, strides=2, padding="same")),
                         (5, 5, 3), F),
    "batch_normalization": (lambda: sequential((5, 5, 3), F, batch_norm_with_statistics(3)), (5, 5, 3), F),
    "layer_normalization": (lambda: sequential((4, 6), F, L.LayerNormalization()), (4, 6), F),
    "max_pooling2d": (lambda: sequential((8, 8, 3), F, L.MaxPooling2D(2)), (8, 8, 3), F),
    "average_pooling2d_same": (lambda: sequential((7, 7, 3), F, L.AveragePooling2D(3, 2, padding="same")),
                               (7, 7, 3), F),
    "global_average_pooling2d": (lambda: sequential((6, 6, 3), F, L.GlobalAveragePooling2D()), (6, 6, 3), F),
    "global_max_pooling2d": (lambda: sequential((6, 6, 3), F, L.GlobalMaxPooling2D()), (6, 6, 3), F),
    "dropout": (lambda: sequential((6,), F, L.Dense(5), L.Dropout(0.5)), (6,), F),
    "embedding": (embedding_then_dense, (6,), "int32"),
    "multi_head_attention": (attention, (8, 16), F),
    "lstm": (lambda: sequential((5, 3), F, L.LSTM(4)), (5, 3), F),
    "lstm_sequences": (lambda: sequential((5, 3), F, L.LSTM(4, return_sequences=True)), (5, 3), F),
    "bidirectional_lstm": (lambda: sequential((5, 3), F, L.Bidirectional(L.LSTM(4))), (5, 3), F),
    "gru": (lambda: sequential((5, 3), F, L.GRU(4)), (5, 3), F),
    "gru_sequences_reset_before": (lambda: sequential((5, 3), F, L.GRU(4, return_sequences=True,
                                                                        reset_after=False)), (5, 3), F),
    "add": (lambda: two_input(L.Add()), (4, 6), F),
    "subtract": (lambda: two_input(L.Subtract()), (4, 6), F),
    "multiply": (lambda: two_input(L.Multiply()), (4, 6), F),
    "concatenate": (lambda: two_input(L.Concatenate()), (4, 6), F),
    "reshape": (lambda: sequential((4, 6), F, L.Reshape((8, 3))), (4, 6), F),
    "flatten": (lambda: sequential((4, 6), F, L.Flatten()), (4, 6), F),
    "permute": (lambda: sequential((2, 3, 4), F, L.Permute((3, 1, 2))), (2, 3, 4), F),
    "upsampling2d": (lambda: sequential((4, 4, 3), F, L.UpSampling2D(2)), (4, 4, 3), F),
    "zero_padding2d": (lambda: sequential((4, 4, 3), F, L.ZeroPadding2D(((1, 2), (0, 1)))), (4, 4, 3), F),
    "cropping2d": (lambda: sequential((6, 6, 3), F, L.Cropping2D(((1, 2), (0, 1)))), (6, 6, 3), F),
}
for _name in ("relu", "relu6", "gelu", "swish", "silu", "sigmoid", "hard_sigmoid", "tanh", "softmax", "elu",
              "selu", "leaky_relu"):
    LAYERS[f"activation_{_name}"] = ((lambda n=_name: sequential((4, 6), F, L.Activation(n))), (4, 6), F)
LAYERS["activation_gelu_tanh"] = (lambda: sequential((4, 6), F, L.Activation(gelu_tanh)), (4, 6), F)


def sample_input(shape, dtype, batch=2, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "int32":
        return rng.integers(0, 20, (batch,) + tuple(shape)).astype(np.int32)
    return (rng.standard_normal((batch,) + tuple(shape)) * 2).astype(np.float32)
