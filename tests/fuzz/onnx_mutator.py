"""Structure-aware ONNX mutations: parse the ModelProto, change one thing a hostile or broken
exporter could (a dim, a dtype, an attribute, an initializer's dims/bytes/external-data path, an
edge, a node, an op type, the opset) and serialize it again, so the compiler sees a well-formed
protobuf with a semantic problem."""
import random
from typing import List, Optional

import onnx
from onnx import AttributeProto, TensorProto

from popef_mutator import INTERESTING_INTS

DIMS = [0, 1, 2, 3, 4, -1, -7, 1 << 20, 1 << 31, 1 << 40, (1 << 62) + 3, (1 << 63) - 1]
ELEM_TYPES = [TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL,
              TensorProto.STRING, TensorProto.DOUBLE, TensorProto.UINT8, TensorProto.COMPLEX64, 0, 99]
OP_TYPES = ["Add", "Mul", "MatMul", "Conv", "Reshape", "Relu", "Gemm", "Softmax", "MaxPool", "Flatten", "Concat",
            "Transpose", "Gather", "Slice", "Resize", "Expand", "Tile", "ConstantOfShape", "Range", "Loop", "If",
            "Unknown", "Einsum", "Split", "Pad", "ReduceSum", "Cast", "Where", "TopK", "NonZero"]
EXTERNAL_PATHS = ["../../../../etc/passwd", "/etc/passwd", "..", "w.bin", "sub/../../w.bin", "/proc/self/mem"]


def _value_infos(graph: onnx.GraphProto) -> List[onnx.ValueInfoProto]:
    return list(graph.input) + list(graph.output) + list(graph.value_info)


def _names(graph: onnx.GraphProto) -> List[str]:
    names = [v.name for v in _value_infos(graph)] + [t.name for t in graph.initializer]
    names += [o for n in graph.node for o in n.output]
    return [n for n in names if isinstance(n, str)] + ["", "missing_tensor"]


def _mutate_value_info(graph, rng):
    infos = _value_infos(graph)
    if not infos:
        return
    tensor_type = rng.choice(infos).type.tensor_type
    choice = rng.randrange(5)
    dims = tensor_type.shape.dim
    if choice == 0 and len(dims):
        dims[rng.randrange(len(dims))].dim_value = rng.choice(DIMS) if rng.random() < 0.8 else 0
    elif choice == 1 and len(dims):
        dims[rng.randrange(len(dims))].dim_param = rng.choice(["N", "batch", ""])
    elif choice == 2:
        tensor_type.shape.dim.add().dim_value = rng.choice(DIMS)
    elif choice == 3 and len(dims):
        del dims[rng.randrange(len(dims))]
    else:
        tensor_type.elem_type = rng.choice(ELEM_TYPES)


def _mutate_attribute(node: onnx.NodeProto, rng):
    if not node.attribute or rng.random() < 0.15:
        attr = node.attribute.add()
        attr.name = rng.choice(["axis", "perm", "kernel_shape", "strides", "pads", "group", "transA", "alpha", "mode"])
        attr.type = AttributeProto.INT
        attr.i = rng.choice(INTERESTING_INTS[:20])
        return
    attr = rng.choice(node.attribute)
    choice = rng.randrange(6)
    if choice == 0:
        node.attribute.remove(attr)
    elif attr.type == AttributeProto.INT:
        attr.i = max(-(1 << 63), min((1 << 63) - 1, rng.choice(DIMS + [attr.i + 1, attr.i - 1])))
    elif attr.type == AttributeProto.INTS:
        values = list(attr.ints)
        if values and choice < 4:
            values[rng.randrange(len(values))] = rng.choice(DIMS)
        elif choice == 4:
            values.append(rng.choice(DIMS[:6]))
        elif values:
            values.pop()
        del attr.ints[:]
        attr.ints.extend(values)
    elif attr.type == AttributeProto.FLOAT:
        attr.f = rng.choice([0.0, -1.0, float("nan"), float("inf"), 1e30])
    elif attr.type == AttributeProto.STRING:
        attr.s = rng.choice([b"", b"nearest", b"linear", b"SAME_UPPER", b"\xff"])
    else:
        attr.type = rng.choice([AttributeProto.INT, AttributeProto.FLOAT, AttributeProto.STRING, AttributeProto.INTS])


def _mutate_initializer(graph, rng):
    if not graph.initializer:
        return
    t = rng.choice(graph.initializer)
    choice = rng.randrange(6)
    if choice == 0 and len(t.dims):
        t.dims[rng.randrange(len(t.dims))] = rng.choice(DIMS)
    elif choice == 1:
        t.dims.append(rng.choice(DIMS[:5]))
    elif choice == 2:
        t.data_type = rng.choice(ELEM_TYPES)
    elif choice == 3 and t.raw_data:
        t.raw_data = t.raw_data[:rng.randrange(len(t.raw_data))]
    elif choice == 4:
        t.raw_data = t.raw_data + bytes(rng.choice([1, 4, 8]))
    else:
        t.data_location = TensorProto.EXTERNAL
        del t.external_data[:]
        entry = t.external_data.add()
        entry.key, entry.value = "location", rng.choice(EXTERNAL_PATHS)
        if rng.random() < 0.5:
            entry = t.external_data.add()
            entry.key, entry.value = "length", str(rng.choice(DIMS[1:]))
        t.ClearField("raw_data")


def _mutate_graph(graph, rng):
    nodes = graph.node
    if not nodes:
        return
    node = rng.choice(nodes)
    choice = rng.randrange(6)
    if choice == 0 and node.input:
        node.input[rng.randrange(len(node.input))] = rng.choice(_names(graph))
    elif choice == 1 and node.output:
        node.output[rng.randrange(len(node.output))] = rng.choice(_names(graph))
    elif choice == 2:
        nodes.remove(node)
    elif choice == 3:
        nodes.add().CopyFrom(node)
    elif choice == 4:
        node.op_type = rng.choice(OP_TYPES)
    else:
        if rng.random() < 0.5:
            node.input.append(rng.choice(_names(graph)))
        elif node.input:
            del node.input[-1]


def mutate_onnx(data: bytes, rng: random.Random) -> Optional[bytes]:
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
    except Exception:  # protobuf's DecodeError and friends: not a model, let the byte mutator work
        return None
    if not model.HasField("graph"):
        return None
    graph = model.graph
    for _ in range(rng.choice([1, 1, 2, 3])):
        r = rng.random()
        if r < 0.25:
            _mutate_value_info(graph, rng)
        elif r < 0.5 and graph.node:
            _mutate_attribute(rng.choice(graph.node), rng)
        elif r < 0.7:
            _mutate_initializer(graph, rng)
        elif r < 0.95:
            _mutate_graph(graph, rng)
        elif model.opset_import:
            model.opset_import[0].version = rng.choice([1, 6, 7, 10, 11, 13, 17, 21, 99])
    return model.SerializeToString()
