"""The full-size Keras architectures on the emulator against TensorFlow: MobileNetV2 (alpha 1.0,
224x224) and ResNet50 (224x224) with random weights and calibrated BatchNorm, and the BERT-style
encoder (4 layers, hidden 256, 4 heads, seq 128); batch 1 and 8, fp32 and fp16. Checks the same
tolerances as tests/models/test_keras_architectures.py (which runs small variants) and prints
the errors and one run's wall time next to TensorFlow's.

    .venv/bin/python benchmarks/bench_keras_architectures.py [--models mobilenet_v2 resnet50 bert_encoder]
                                                             [--batch 1 8] [--precision fp32 fp16]

Takes several minutes on a 2-core machine (mostly tf2onnx exporting ResNet50). Exits 1 if a
tolerance is missed.
"""
import argparse
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [_REPO, os.path.join(_REPO, "tests", "models")]

import keras  # noqa: E402

from architecture_checks import check, export, run  # noqa: E402
from keras_architectures import (bert_encoder, calibrate_batch_norm, mobilenet_v2, resnet50, sample_ids,  # noqa: E402
                                 sample_images)


def build(name, batch):
    keras.utils.set_random_seed(0)
    if name == "mobilenet_v2":
        model, x = mobilenet_v2(image_size=224, alpha=1.0), sample_images(batch, 224)
        calibrate_batch_norm(model, x)
    elif name == "resnet50":
        model, x = resnet50(image_size=224), sample_images(batch, 224)
        calibrate_batch_norm(model, x)
    else:
        model, x = bert_encoder(layers=4, hidden=256, heads=4, seq_len=128), sample_ids(batch, 128)
    return model, x


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["mobilenet_v2", "resnet50", "bert_encoder"])
    p.add_argument("--batch", nargs="+", type=int, default=[1, 8])
    p.add_argument("--precision", nargs="+", default=["fp32", "fp16"], choices=["fp32", "fp16"])
    args = p.parse_args(argv)
    failures = 0
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models:
            exported = export(name, *build(name, max(args.batch)), folder)
            print(f"{name}: TensorFlow batch {max(args.batch)}: {exported.tf_seconds_per_batch * 1e3:.1f} ms")
            for batch in args.batch:
                for precision in args.precision:
                    runs = run(exported, batch, precision)
                    try:
                        report = check(exported, batch, precision, runs)
                        status = "ok"
                    except AssertionError as e:
                        report, status = {}, f"FAILED: {e}"
                        failures += 1
                    errors = "; ".join(f"{out}: max_rel {r['max_rel']:.2e} l2_rel {r['l2_rel']:.2e} "
                                       f"(onnxruntime {r['ort_l2_rel']:.2e}"
                                       + (f", fp16 weight floor {r['floor_l2_rel']:.2e}" if "floor_l2_rel" in r else "")
                                       + ")" for out, r in report.items())
                    print(f"  batch {batch} {precision}: emulator {runs.seconds * 1e3:.1f} ms/run  {errors}  {status}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
