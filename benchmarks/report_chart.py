"""bench_models.py's PNG chart (matplotlib, requirements-bench.txt): left (top), ModelRunner's median
latency over the best peer's (peer_verdict: onnxruntime or OpenVINO fp32, either timing mode)
per cell with the targets; right (bottom), achieved GFLOP/s of
ModelRunner, onnxruntime, OpenVINO and TensorFlow per cell against the measured sgemm peak."""
import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from peer_verdict import FAMILY_TARGET, TUNED_TARGET  # noqa: E402
from report import PEAK_TARGET  # noqa: E402


_SHORT = {"mobilenet_v2": "MobileNetV2", "resnet50": "ResNet50", "bert_encoder": "BERT encoder",
          "efficientnet_b0": "EfficientNetB0", "densenet121": "DenseNet121", "convnext_tiny": "ConvNeXtTiny",
          "inception_v3": "InceptionV3", "vit_encoder": "ViT-Tiny"}


def write(results: dict, path: str) -> None:
    cells = [c for c in results.get("cells") or [] if not c.get("failed")]
    if not cells:
        raise ValueError("the chart needs the latency part (--parts latency)")
    groups = sorted({(c["model"], c["batch"]) for c in cells}, key=lambda g: [c["model"] for c in cells].index(g[0]) * 100 + g[1])
    names = [f"{_SHORT.get(m, m)}\nbatch {b}" for m, b in groups]
    cell = {(c["model"], c["batch"], c["precision"]): c for c in cells}
    x = np.arange(len(groups))
    # side by side for a few cells; one above the other (full width each) for the whole suite
    wide = len(groups) > 6
    fig, (left, right) = plt.subplots(2 if wide else 1, 1 if wide else 2,
                                      figsize=(max(15, 1.1 * len(groups)), 11) if wide else (15, 5.5))

    width = 0.38
    for i, (precision, color) in enumerate((("fp32", "#1f77b4"), ("fp16", "#ff7f0e"))):
        ratios = [cell[(m, b, precision)]["best_peer"]["ratio"] if (m, b, precision) in cell else np.nan
                  for m, b in groups]
        bars = left.bar(x + (i - 0.5) * width, ratios, width, label=f"ModelRunner {precision} / best fp32 peer",
                        color=color)
        left.bar_label(bars, fmt="%.2f", fontsize=8)
    left.axhline(TUNED_TARGET, color="red", linestyle="--", label=f"{TUNED_TARGET}× target (tuned networks)")
    left.axhline(FAMILY_TARGET, color="gray", linewidth=0.8, label=f"{FAMILY_TARGET}× target (other families, fp32)")
    left.set_xticks(x, names, fontsize=8)
    left.set_ylabel("median latency ratio (lower is better)")
    left.set_title("Latency relative to the best of onnxruntime and OpenVINO (same threads, either mode)")
    left.legend(fontsize=8)

    series = [("ModelRunner fp32", "#1f77b4"), ("ModelRunner fp16", "#ff7f0e"), ("onnxruntime fp32", "#2ca02c"),
              ("OpenVINO fp32", "#d62728"), ("TensorFlow fp32", "#9467bd")]
    width = 0.8 / len(series)
    for i, (name, color) in enumerate(series):
        values = [cell[(m, b, "fp32")]["gflops"].get(name, np.nan) for m, b in groups]
        right.bar(x + (i - (len(series) - 1) / 2) * width, values, width, label=name, color=color)
    cell_peaks = [cell[(m, b, "fp32")].get("peak") for m, b in groups]
    peak = results.get("peak")
    if all(cell_peaks):  # each cell's own interleaved peak: a short black bar over its group
        for i, p in enumerate(cell_peaks):
            right.hlines(p["peak_gflops"], x[i] - 0.45, x[i] + 0.45, color="black",
                         label="sgemm peak (same cell)" if i == 0 else None)
            right.hlines(PEAK_TARGET * p["peak_gflops"], x[i] - 0.45, x[i] + 0.45, color="red", linestyle="--",
                         label=f"{PEAK_TARGET:.0%} of it (ResNet50 b8 target)" if i == 0 else None)
    elif peak:
        right.axhline(peak["peak_gflops"], color="black", linestyle="-", label=f"measured sgemm peak {peak['peak_gflops']:.0f}")
        right.axhline(PEAK_TARGET * peak["peak_gflops"], color="red", linestyle="--",
                      label=f"{PEAK_TARGET:.0%} of peak (ResNet50 b8 target)")
    right.set_xticks(x, names, fontsize=8)
    right.set_ylabel("GFLOP/s (2 × MACs of Conv/MatMul/Gemm)")
    right.set_title("Achieved GFLOP/s")
    right.legend(fontsize=8)

    m = results["machine"]
    load = f", load average {m['load_average_start'][0]:.1f} → {m.get('load_average_end', [float('nan')])[0]:.1f}"
    fig.suptitle(f"bench_models.py — {m['date_utc']}, {m['cores']} cores, {m['threads']} threads{load}"
                 + (" — QUICK SMOKE RUN (small models)" if results.get("quick") else ""), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
