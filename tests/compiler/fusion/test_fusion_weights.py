"""Identical initializers of fused models are stored once: measured on the file size."""
import numpy as np

from compiler.fusion import fuse_models
from popef.reader import PopefFile
from fusion_test_models import mlp_model

BIG = (512, 512)  # 1 MiB of float32


def big_weight(seed):
    return np.random.default_rng(seed).standard_normal(BIG).astype(np.float32)


def entries(weights_per_model, precision="fp32"):
    # Same shared W0 (when given), different small layers: only W0 is identical across models.
    return [dict(input_model=mlp_model(f"in{i}", "Y", (512, 512, 4), seed=i, weights={"W0": w}), batch_size=2,
                 precision=precision) for i, w in enumerate(weights_per_model)]


def test_the_same_big_weight_in_three_models_costs_one_copy():
    shared = big_weight(0)
    single = len(fuse_models(entries([shared])).to_bytes())
    fused_shared = fuse_models(entries([shared] * 3))
    fused_distinct = fuse_models(entries([big_weight(1), big_weight(2), big_weight(3)]))
    nbytes = shared.nbytes
    shared_size, distinct_size = len(fused_shared.to_bytes()), len(fused_distinct.to_bytes())
    # Two more models with the same W0 add only their small layers and programs...
    assert shared_size - single < nbytes // 8, (single, shared_size)
    # ...while distinct big weights add two more full copies.
    assert distinct_size - single >= 2 * nbytes, (single, distinct_size)
    tensor_data = PopefFile(fused_shared.to_bytes()).metadata["tensor_data"]
    assert [t["name"] for t in tensor_data if t["nbytes"] == nbytes] == ["graph0/W0"]
    assert fused_shared.weights_bytes < nbytes + 64 * 1024
    # Every subgraph's W0 tensor points at the same weight memory.
    ex = fused_shared.executable
    offsets = {t["offset"] for t in ex["tensors"] if t["name"].endswith("/W0")}
    assert len([t for t in ex["tensors"] if t["name"].endswith("/W0")]) == 3 and len(offsets) == 1


def test_precision_changes_the_bytes_so_fp16_and_fp32_copies_are_distinct():
    shared = big_weight(0)
    mixed = entries([shared, shared])
    mixed[1]["precision"] = "fp16"
    exe = fuse_models(mixed)
    sizes = sorted(t["nbytes"] for t in exe.metadata["tensor_data"] if t["nbytes"] >= shared.nbytes // 2)
    assert sizes == [shared.nbytes // 2, shared.nbytes]


def test_same_name_different_content_gets_distinct_blob_names():
    exe = fuse_models(entries([big_weight(1), big_weight(2)]))
    names = [t["name"] for t in exe.metadata["tensor_data"]]
    assert "graph0/W0" in names and "graph1/W0" in names and len(names) == len(set(names))
