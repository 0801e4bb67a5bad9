"""Concat inputs written in place against onnxruntime: a DenseNet-style dense block (each layer's
new channels concatenated onto the running feature map, a chain of Concats) and an
Inception-style block (four branches concatenated), at batch 1 (the memory plan puts the
blocked Concat inputs at their slices of the output, so their producers write there and the
Concat copies nothing) and batch 8 (several outer slabs: copied). float32 within 1e-4 of
onnxruntime; float16 within the float16 tolerance; also in a process on the portable SIMD path."""
import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import Compiler
from compiler.converter import Converter
from e2e_helpers import assert_matches_fp32_reference, check_every_case_in_new_process, run_onnxruntime
from popef.format import BlobType
from popef.reader import PopefFile
from tf_popef_op.runtime import ModelRunner, RuntimeConfig

F = TensorProto.FLOAT


def _block(kind, n, seed=0):
    rng = np.random.default_rng(seed)
    inits, nodes = {}, []

    def conv(x, cin, m, out, k=1):
        inits[f"{out}_W"] = (rng.standard_normal((m, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float32)
        inits[f"{out}_B"] = (rng.standard_normal(m) * 0.1).astype(np.float32)
        nodes.append(helper.make_node("Conv", [x, f"{out}_W", f"{out}_B"], [f"{out}_conv"], kernel_shape=[k, k],
                                      pads=[k // 2] * 4))
        nodes.append(helper.make_node("Relu", [f"{out}_conv"], [out]))
        return out

    if kind == "dense":
        h = w = 14
        features, width = conv("X", 8, 16, "stem", k=3), 16
        for layer in range(4):  # BN-free DenseNet layer: 1x1 bottleneck, 3x3 growth of 8 channels
            bottleneck = conv(features, width, 16, f"l{layer}_b")
            grown = conv(bottleneck, 16, 8, f"l{layer}_g", k=3)
            nodes.append(helper.make_node("Concat", [features, grown], [f"cat{layer}"], axis=1))
            features, width = f"cat{layer}", width + 8
        conv(features, width, 16, "Y")
    else:  # InceptionV3's mixed block: 1x1, 1x1 -> 3x3, 1x1 -> 3x3 -> 3x3, avg pool -> 1x1
        h = w = 17
        stem = conv("X", 8, 24, "stem")
        b1 = conv(stem, 24, 32, "b1")  # 32 channels of 17x17: slices start 64-byte aligned in fp16 too
        b2 = conv(conv(stem, 24, 8, "b2a"), 8, 32, "b2b", k=3)
        b3 = conv(conv(conv(stem, 24, 8, "b3a"), 8, 16, "b3b", k=3), 16, 32, "b3c", k=3)
        nodes.append(helper.make_node("AveragePool", [stem], ["pool"], kernel_shape=[3, 3], pads=[1] * 4))
        b4 = conv("pool", 24, 8, "b4")
        nodes.append(helper.make_node("Concat", [b1, b2, b3, b4], ["cat"], axis=1))
        conv("cat", 104, 16, "Y")
    graph = helper.make_graph(nodes, kind, [helper.make_tensor_value_info("X", F, [n, 8, h, w])],
                              [helper.make_tensor_value_info("Y", F, [n, 16, h, w])],
                              [numpy_helper.from_array(v, name) for name, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


# name: (block, batch, Concat inputs in place, of)
CASES = {
    "dense_b1": ("dense", 1, 8, 8),
    "dense_b8": ("dense", 8, 0, 8),
    "inception_b1": ("inception", 1, 4, 4),
    "inception_b8": ("inception", 8, 0, 4),
}


def concat_inputs_in_place(executable) -> tuple:
    """(Concat inputs at their slice of the output, Concat inputs) in the executable's plan."""
    blob = next(b for b in PopefFile(executable.to_bytes()).blobs if b.type == BlobType.EXECUTABLE)
    doc = json.loads(bytes(blob.payload))
    tensors = {t["id"]: t for t in doc["tensors"]}
    placed = total = 0
    for step in doc["programs"]["main"]:
        if step["op"] == "Concat":
            out = tensors[step["outputs"][0]]
            offset = out.get("offset")
            for i in step["inputs"]:
                t = tensors[i]
                placed += t["storage"] == out["storage"] == "arena" and t["offset"] == offset
                total += 1
                offset += int(np.prod(t["shape"])) * np.dtype(t["dtype"]).itemsize
    return placed, total


def check_case(name, precision):
    kind, n, placed, total = CASES[name]
    model = _block(kind, n)
    x = np.random.default_rng(1).standard_normal((n, 8) + ((14, 14) if kind == "dense" else (17, 17)))
    x = x.astype(np.float32)
    want = run_onnxruntime(model, {"X": x})["Y"]
    converted = Converter(precision=precision).convert(model)
    executable = Compiler.compile(converted)
    assert concat_inputs_in_place(executable) == (placed, total), name
    runner = ModelRunner(executable, RuntimeConfig(profile=True))
    got = runner.execute({"X": x.astype(np.float16) if precision == "fp16" else x})["Y"].astype(np.float32)
    ops = [row["op"] for row in runner.profile()]
    assert ops.count("Concat") == total // (2 if kind == "dense" else 4), f"{name}: {ops}"
    assert "FromNchwc" in ops and ops.count("ToNchwc") == 1, f"{name}: the block runs blocked: {ops}"
    assert_matches_fp32_reference(got, want, precision, name)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", list(CASES))
def test_concat_block_vs_onnxruntime(name, precision):
    check_case(name, precision)


def test_concat_blocks_vs_onnxruntime_on_the_portable_path():
    check_every_case_in_new_process("test_concat_in_place", len(CASES), TF_POPEF_SIMD="portable")
