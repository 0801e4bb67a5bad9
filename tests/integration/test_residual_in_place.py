"""ResNet blocks with the residual Sum added in place against onnxruntime: the memory plan gives
each block's last 1x1 convolution (Conv + Add + Relu, one NchwcConv) its Sum's bytes
(`in_place_input`), so Y overwrites the shortcut it reads. Identity blocks chain (one block's
output is the next one's Sum), a projection block's Sum is its strided 1x1 shortcut, and a
block whose expanding 1x1 reads 528 channels takes two passes over them (float32 Y then holds
partial sums in the Sum's bytes). float32 within 1e-4 of onnxruntime; float16 within the
float16 tolerance; also in a process on the portable SIMD path."""
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


def _network(n, wide, seed=0):
    """Stem 3x3 (8 -> 32), an identity block, a projection block (stride 2, 32 -> 64) and an
    identity block; `wide`: bottlenecks of 528 channels (two passes in the expanding 1x1)."""
    rng = np.random.default_rng(seed)
    inits, nodes = {}, []

    def conv(x, cin, m, out, k=1, stride=1, relu=True):
        inits[f"{out}_W"] = (rng.standard_normal((m, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float32)
        inits[f"{out}_B"] = (rng.standard_normal(m) * 0.1).astype(np.float32)
        conv_out = f"{out}_conv" if relu else out
        nodes.append(helper.make_node("Conv", [x, f"{out}_W", f"{out}_B"], [conv_out], kernel_shape=[k, k],
                                      pads=[k // 2] * 4, strides=[stride, stride]))
        if relu:
            nodes.append(helper.make_node("Relu", [conv_out], [out]))
        return out

    def block(x, cin, mid, cout, name, stride=1):
        a = conv(x, cin, mid, f"{name}_a", stride=stride)
        b = conv(a, mid, mid, f"{name}_b", k=3)
        c = conv(b, mid, cout, f"{name}_c", relu=False)
        shortcut = x if stride == 1 and cin == cout else conv(x, cin, cout, f"{name}_s", stride=stride, relu=False)
        nodes.append(helper.make_node("Add", [c, shortcut], [f"{name}_add"]))
        nodes.append(helper.make_node("Relu", [f"{name}_add"], [name]))
        return name

    mid = 528 if wide else 16
    y = conv("X", 8, 32, "stem", k=3)
    y = block(y, 32, mid, 32, "block1")
    y = block(y, 32, mid, 64, "block2", stride=2)
    block(y, 64, mid, 64, "Y")
    graph = helper.make_graph(nodes, "resnet_blocks", [helper.make_tensor_value_info("X", F, [n, 8, 14, 14])],
                              [helper.make_tensor_value_info("Y", F, [n, 64, 7, 7])],
                              [numpy_helper.from_array(v, name) for name, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def sums_in_place(executable) -> tuple:
    """(NchwcConv steps whose Y takes its Sum's bytes, NchwcConv steps with a Sum) of the plan."""
    blob = next(b for b in PopefFile(executable.to_bytes()).blobs if b.type == BlobType.EXECUTABLE)
    doc = json.loads(bytes(blob.payload))
    tensors = {t["id"]: t for t in doc["tensors"]}
    in_place = with_sum = 0
    for step in doc["programs"]["main"]:
        if step["op"] != "NchwcConv" or not step["attrs"].get("has_sum"):
            continue
        with_sum += 1
        if "in_place_input" in step:
            index = step["in_place_input"]
            assert index == (3 if step["attrs"]["has_bias"] else 2), step
            total, y = tensors[step["inputs"][index]], tensors[step["outputs"][0]]
            assert total["storage"] == y["storage"] == "arena" and total["offset"] == y["offset"], step
            in_place += 1
    return in_place, with_sum


# name: (batch, wide bottlenecks, Sums in place): the last block writes the graph output (after
# FromNchwc: its Y is still an arena tensor), so all three blocks take their Sum's bytes.
CASES = {"b1": (1, False, 3), "b8": (8, False, 3), "wide_b2": (2, True, 3)}


def check_case(name, precision):
    n, wide, expected = CASES[name]
    model = _network(n, wide)
    x = np.random.default_rng(1).standard_normal((n, 8, 14, 14)).astype(np.float32)
    want = run_onnxruntime(model, {"X": x})["Y"]
    executable = Compiler.compile(Converter(precision=precision).convert(model))
    assert sums_in_place(executable) == (expected, 3), name
    runner = ModelRunner(executable, RuntimeConfig(profile=True))
    got = runner.execute({"X": x.astype(np.float16) if precision == "fp16" else x})["Y"].astype(np.float32)
    ops = [row["op"] for row in runner.profile()]
    assert ops.count("ToNchwc") == 1 and "FromNchwc" in ops, f"{name}: the blocks run blocked: {ops}"
    assert_matches_fp32_reference(got, want, precision, name)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", list(CASES))
def test_residual_blocks_in_place_vs_onnxruntime(name, precision):
    check_case(name, precision)


def test_residual_blocks_in_place_vs_onnxruntime_on_the_portable_path():
    check_every_case_in_new_process("test_residual_in_place", len(CASES), TF_POPEF_SIMD="portable")
