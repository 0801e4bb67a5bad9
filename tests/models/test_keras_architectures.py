"""Real architectures from Keras, built offline with random weights, exported as SavedModels,
compiled and run on the emulator at batch 1 and 8 in fp32 and fp16, against TensorFlow (see
architecture_checks.py for the error measures): small variants here, so `make test` stays
reasonable (about three minutes for this module):

- MobileNetV2 (alpha 0.35, 96x96) and ResNet50 (64x64), `weights=None`, BatchNorm statistics
  calibrated on the test images, compared on the logits (no softmax);
- a BERT-style encoder of Keras layers (2 layers, hidden 256, 4 heads, seq 128), compared on
  the classifier logits and the last hidden states;
- a ViT-style encoder (32x32 images, 8x8 patches, hidden 32, 2 heads) with 8 blocks: tf2onnx
  writes each attention Einsum with Reshape targets computed from Shape values, which must all
  fold (at batch 1 nothing but the folding pins their dims) before every shape is static.

Full sizes (MobileNetV2 1.0 at 224x224, ResNet50 at 224x224, BERT 4 layers): a separate command,
`.venv/bin/python benchmarks/bench_keras_architectures.py` (also prints timings).
"""
import keras
import pytest

from architecture_checks import check, export, run
from keras_architectures import (bert_encoder, calibrate_batch_norm, mobilenet_v2, resnet50, sample_ids,
                                 sample_images, vit_encoder)

BATCHES = (1, 8)


def build(name):
    keras.utils.set_random_seed(0)
    if name == "mobilenet_v2":
        model, x = mobilenet_v2(image_size=96, alpha=0.35), sample_images(max(BATCHES), 96)
        calibrate_batch_norm(model, x)
    elif name == "resnet50":
        model, x = resnet50(image_size=64), sample_images(max(BATCHES), 64)
        calibrate_batch_norm(model, x)
    elif name == "vit_encoder":
        model = vit_encoder(image_size=32, patch=8, layers=8, hidden=32, heads=2, mlp=64)
        x = sample_images(max(BATCHES), 32)
    else:
        model, x = bert_encoder(layers=2, hidden=256, heads=4, seq_len=128), sample_ids(max(BATCHES), 128)
    return model, x


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("architectures"))
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = export(name, *build(name), folder)
        return cache[name]
    return get


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("name", ["mobilenet_v2", "resnet50", "bert_encoder", "vit_encoder"])
def test_architecture_matches_tensorflow(exported, name, batch, precision):
    model = exported(name)
    check(model, batch, precision, run(model, batch, precision))
