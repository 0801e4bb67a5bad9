"""The networks of bench_models.py (tests/models/keras_architectures.py builders, random
weights, BatchNorm calibrated) and their ONNX exports, cached in benchmarks/.cache/.

tf2onnx takes minutes on ResNet50, so each export is written once to
`benchmarks/.cache/<model>-<config>-<builders hash>.onnx` (the folder: $TF_POPEF_BENCH_CACHE if
set) and reused. The export keeps a dynamic batch (the converter fixes it), so one file serves
batch 1 and batch 8. The key holds a hash of keras_architectures.py, so a change to a builder
re-exports. Weights are deterministic
(keras seed 0, calibration on the same sample), so the Keras model rebuilt for TensorFlow's
timing has the weights of the cached export; bench_models.py checks that on every run.
"""
import dataclasses
import hashlib
import os
import sys
import tempfile
from typing import Callable, Dict

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_MODELS_DIR = os.path.join(_REPO, "tests", "models")
for _path in (_REPO, _MODELS_DIR):
    if _path not in sys.path:
        sys.path.insert(0, _path)

CACHE_DIR = os.environ.get("TF_POPEF_BENCH_CACHE") or os.path.join(_REPO, "benchmarks", ".cache")
CALIBRATION_BATCH = 8  # BatchNorm statistics come from this many samples; inputs are their first rows


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    name: str                                   # key used on the command line
    config: Dict[str, object]                   # builder keyword arguments
    label: str                                  # for tables
    kind: str                                   # "image" or "tokens"

    @property
    def cache_key(self) -> str:
        config = "-".join(f"{k}{v}" for k, v in sorted(self.config.items()))
        return f"{self.name}-{config}-{_builders_hash()}"

    def inputs(self, batch: int) -> np.ndarray:
        from keras_architectures import sample_ids, sample_images
        if self.kind == "image":
            return sample_images(CALIBRATION_BATCH, self.config["image_size"])[:batch]
        return sample_ids(CALIBRATION_BATCH, self.config["seq_len"])[:batch]

    def build_keras(self):
        """The Keras model with the weights of the cached export (deterministic)."""
        import keras
        import keras_architectures as arch
        keras.utils.set_random_seed(0)
        builder = getattr(arch, self.name, None)
        if builder is None:
            raise ValueError(f"unknown model '{self.name}': no builder of that name in keras_architectures.py")
        model = builder(**self.config)
        if self.kind == "image":
            arch.calibrate_batch_norm(model, self.inputs(CALIBRATION_BATCH))
        return model


# The networks the kernels were tuned on; the families added to see whether the speed generalizes.
TUNED = ("mobilenet_v2", "resnet50", "bert_encoder")
FAMILIES = ("efficientnet_b0", "densenet121", "convnext_tiny", "inception_v3", "vit_encoder")

FULL = {
    "mobilenet_v2": ModelSpec("mobilenet_v2", {"image_size": 224, "alpha": 1.0}, "MobileNetV2 224 α1.0", "image"),
    "resnet50": ModelSpec("resnet50", {"image_size": 224}, "ResNet50 224", "image"),
    "bert_encoder": ModelSpec("bert_encoder", {"layers": 4, "hidden": 256, "heads": 4, "seq_len": 128},
                              "BERT encoder L4 H256 A4 S128", "tokens"),
    "efficientnet_b0": ModelSpec("efficientnet_b0", {"image_size": 224}, "EfficientNetB0 224", "image"),
    "densenet121": ModelSpec("densenet121", {"image_size": 224}, "DenseNet121 224", "image"),
    "convnext_tiny": ModelSpec("convnext_tiny", {"image_size": 224}, "ConvNeXtTiny 224", "image"),
    "inception_v3": ModelSpec("inception_v3", {"image_size": 299}, "InceptionV3 299", "image"),
    "vit_encoder": ModelSpec("vit_encoder", {"image_size": 224}, "ViT-Tiny/16 224 (L12 H192 A3)", "image"),
}
# --quick: the same architectures, small enough for a smoke run (the model tests' sizes).
QUICK = {
    "mobilenet_v2": ModelSpec("mobilenet_v2", {"image_size": 96, "alpha": 0.35}, "MobileNetV2 96 α0.35", "image"),
    "resnet50": ModelSpec("resnet50", {"image_size": 64}, "ResNet50 64", "image"),
    "bert_encoder": ModelSpec("bert_encoder", {"layers": 1, "hidden": 64, "heads": 2, "seq_len": 32},
                              "BERT encoder L1 H64 A2 S32", "tokens"),
    "efficientnet_b0": ModelSpec("efficientnet_b0", {"image_size": 32}, "EfficientNetB0 32", "image"),
    "densenet121": ModelSpec("densenet121", {"image_size": 32}, "DenseNet121 32", "image"),
    "convnext_tiny": ModelSpec("convnext_tiny", {"image_size": 32}, "ConvNeXtTiny 32", "image"),
    "inception_v3": ModelSpec("inception_v3", {"image_size": 75}, "InceptionV3 75", "image"),
    "vit_encoder": ModelSpec("vit_encoder", {"image_size": 32, "patch": 8, "layers": 1, "hidden": 32, "heads": 2,
                                             "mlp": 64}, "ViT 32/8 L1 H32 A2", "image"),
}


def _builders_hash() -> str:
    with open(os.path.join(_MODELS_DIR, "keras_architectures.py"), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:10]


def cached_onnx_path(spec: ModelSpec, log: Callable[[str], None] = print) -> str:
    """The path of the spec's ONNX export (dynamic batch, opset 17), exporting it if missing."""
    path = os.path.join(CACHE_DIR, spec.cache_key + ".onnx")
    if os.path.exists(path):
        return path
    import onnx
    from compiler.frontends import tensorflow_to_onnx
    log(f"exporting {spec.label} with tf2onnx into {os.path.relpath(path, _REPO)} (once; later runs reuse it)")
    os.makedirs(CACHE_DIR, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        saved_model = os.path.join(folder, spec.name)
        spec.build_keras().export(saved_model, verbose=False)
        model = tensorflow_to_onnx(saved_model)
    partial = path + ".partial"
    onnx.save(model, partial)
    os.replace(partial, path)  # a crash mid-write never leaves a truncated cache entry
    return path


if __name__ == "__main__":  # pre-populate the cache: python benchmarks/model_zoo.py [--quick] [MODEL...]
    specs = QUICK if "--quick" in sys.argv else FULL
    for s in specs.values():
        if s.name in sys.argv or not set(sys.argv[1:]) - {"--quick"}:
            print(cached_onnx_path(s))
