import numpy as np
from onnx import helper

from compiler.lowering.lower_graph import lower_graph
from compiler.lowering.weights import WeightStore
from compiler_test_helpers import F32, fuse_and_lower, make_model


def test_identical_contents_are_stored_once():
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    nodes = [helper.make_node("MatMul", ["X", "W1"], ["a"]), helper.make_node("MatMul", ["X", "W2"], ["b"]),
             helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Add", ["c", "B"], ["O"])]
    model = make_model(nodes, [("X", F32, [2, 3])], [("O", F32, [2, 4])], {"W1": w, "W2": w.copy(), "B": np.ones(4, np.float32)})
    store = WeightStore()
    g = lower_graph(model, store)  # the weights in the order the nodes read them
    assert [e.name for e in store.entries] == ["W1", "B"]
    assert g.tensors["W1"].weight_key == g.tensors["W2"].weight_key
    assert store.get(g.tensors["W2"].weight_key).offset == 0
    assert store.entries[1].offset == 64  # 48 bytes rounded up to 64
    assert store.size == 128


def test_same_bytes_with_another_dtype_or_different_bytes_are_distinct():
    store = WeightStore()
    a = store.add("a", np.zeros(4, np.float32))
    b = store.add("b", np.zeros(4, np.int32))
    c = store.add("a", np.ones(4, np.float32))  # same name, other contents
    assert len({a.key, b.key, c.key}) == 3
    assert [e.name for e in store.entries] == ["a", "b", "a#2"]
    assert [e.offset for e in store.entries] == [0, 64, 128]


def test_shared_store_across_graphs_is_what_fusion_relies_on():
    w = np.linspace(0, 1, 16, dtype=np.float32).reshape(4, 4)
    store = WeightStore()
    for name in ("graph0", "graph1"):
        model = make_model([helper.make_node("MatMul", ["X", "W"], ["O"])], [("X", F32, [1, 4])], [("O", F32, [1, 4])],
                           {"W": w})
        fuse_and_lower(model, store, name=name)
    assert len(store.entries) == 1 and store.size == 64


def test_stored_bytes_are_little_endian_and_contiguous():
    store = WeightStore()
    big_endian = np.arange(6, dtype=">i4").reshape(2, 3).T  # non-contiguous too
    e = store.add("t", big_endian)
    assert e.data.dtype.byteorder in ("<", "=") and e.data.flags.c_contiguous
    assert e.data.tobytes() == np.ascontiguousarray(big_endian.astype("<i4")).tobytes()
    assert (e.dtype, e.shape, e.nbytes) == ("int32", (3, 2), 24)
