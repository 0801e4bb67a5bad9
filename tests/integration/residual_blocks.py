"""ResNet blocks for the in-place Sum tests (test_residual_in_place.py, and the runtime's plan
check in tests/runtime/test_runtime_in_place_sum.py): the ONNX model, and how many of its
NchwcConv steps with a residual Sum write Y on the Sum's bytes in an executable's plan."""
import json

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from popef.format import BlobType
from popef.reader import PopefFile

F = TensorProto.FLOAT


def resnet_blocks(n, wide, seed=0, side=14):
    """Stem 3x3 (8 -> 32), an identity block, a projection block (stride 2, 32 -> 64) and an
    identity block on an 8-channel side x side input; `wide`: bottlenecks of 528 channels (two
    passes in the expanding 1x1)."""
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
    graph = helper.make_graph(nodes, "resnet_blocks", [helper.make_tensor_value_info("X", F, [n, 8, side, side])],
                              [helper.make_tensor_value_info("Y", F, [n, 64, (side + 1) // 2, (side + 1) // 2])],
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
