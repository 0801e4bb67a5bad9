import numpy as np
from onnx import helper

from compiler.lowering.lower_graph import lower_graph
from compiler.lowering.memory_plan import plan_arena
from compiler.lowering.popef_emitter import IndexAnchor, emit_popef
from compiler.lowering.weights import WeightStore
from popef.format import BlobType
from popef.reader import PopefFile
from compiler_test_helpers import F16, F32, fuse_and_lower, make_model

DTYPES = {"float32", "float16", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "bool"}


def _mlp(name_prefix=""):
    p = name_prefix
    nodes = [helper.make_node("Gemm", [f"{p}X", f"{p}W", f"{p}B"], [f"{p}g"], name=f"{p}gemm"),
             helper.make_node("Relu", [f"{p}g"], [f"{p}r"], name=f"{p}relu"),
             helper.make_node("Reshape", [f"{p}r", f"{p}s"], [f"{p}O"], name=f"{p}flat")]
    return make_model(nodes, [(f"{p}X", F32, [4, 3])], [(f"{p}O", F32, [8])],
                      {f"{p}W": np.ones((3, 2), np.float32), f"{p}B": np.zeros(2, np.float32),
                       f"{p}s": np.array([8], np.int64)})


def test_single_model_file_follows_the_contract():
    store = WeightStore()
    graph = lower_graph(_mlp(), store)  # the contract example: Gemm, Relu, Add as written
    plan = plan_arena(graph)
    out = emit_popef([graph], [plan], store, "ipu21", 1, opaques={"compiler": {"k": 1}})
    popef = PopefFile(out.data)
    assert [b.type for b in popef.blobs] == [BlobType.METADATA, BlobType.EXECUTABLE, BlobType.TENSOR_DATA,
                                             BlobType.TENSOR_DATA, BlobType.OPAQUE]
    assert popef.metadata == out.metadata and popef.executable == out.executable
    md, ex = popef.metadata, popef.executable
    assert md["ipu_version"] == "ipu21" and md["batch_size"] == 4 and md["batch_axis"] == 0
    assert md["program_flow"] == {"load": ["load"], "main": ["main"], "save": ["save"]}
    assert [(a["name"], a["direction"], a["shape"], a["subgraph"], a["batch_axis"]) for a in md["anchors"]] == \
        [("X", "input", [4, 3], 0, 0), ("O", "output", [8], 0, -1)]
    assert md["tensor_data"] == [{"name": "W", "dtype": "float32", "shape": [3, 2], "nbytes": 24},
                                 {"name": "B", "dtype": "float32", "shape": [2], "nbytes": 8}]
    assert md["device_memory"] == {"weights_bytes": 128, "arena_bytes": 128, "total_bytes": 256}  # g, r live together
    assert ex["version"] == 1 and ex["weights_bytes"] == 128 and ex["arena_bytes"] == 128
    by_name = {t["name"]: t for t in ex["tensors"]}
    assert [t["id"] for t in ex["tensors"]] == list(range(len(ex["tensors"])))
    for t in ex["tensors"]:
        assert t["dtype"] in DTYPES
        assert ("anchor" in t) == (t["storage"] in ("input", "output"))
        assert ("offset" in t) == (t["storage"] in ("weight", "arena"))
        assert t.get("offset", 0) % 64 == 0
    assert ex["programs"]["load"] == [{"op": "LoadTensorData", "tensor_data": "W", "offset": 0, "nbytes": 24},
                                      {"op": "LoadTensorData", "tensor_data": "B", "offset": 64, "nbytes": 8}]
    main = ex["programs"]["main"]
    assert [(s["op"], s["name"]) for s in main] == [("Gemm", "gemm"), ("Relu", "relu"), ("Reshape", "flat")]
    assert main[0]["inputs"] == [by_name["X"]["id"], by_name["W"]["id"], by_name["B"]["id"]]
    assert main[2]["outputs"] == [by_name["O"]["id"]]
    assert ex["programs"]["save"] == []
    assert ex["subgraphs"] == [{"index": 0, "name": "graph0", "program": "main", "batch_size": 4, "batch_axis": 0,
                                "inputs": ["X"], "outputs": ["O"]}]
    weights = popef.tensor_data()
    np.testing.assert_array_equal(weights["W"], np.ones((3, 2), np.float32))
    assert popef.opaque_json("compiler") == {"k": 1}


def test_two_subgraphs_share_weights_and_switch_on_the_index_anchor():
    store = WeightStore()
    g0 = fuse_and_lower(_mlp("graph0/"), store, name="graph0")
    small = make_model([helper.make_node("Concat", ["graph1/X", "graph1/C"], ["graph1/O"], axis=1)],
                       [("graph1/X", F16, [1, 1])], [("graph1/O", F16, [1, 3])],
                       {"graph1/C": np.array([[1.5, 2.0]], np.float16)})
    g1 = fuse_and_lower(small, store, name="graph1")
    g1.tensors["graph1/X"].aliases.append("graph1/stream0")
    plans = [plan_arena(g0), plan_arena(g1)]
    out = emit_popef([g0, g1], plans, store, "ipu2", 1, index_anchor=IndexAnchor("index", "uint8", (1,)))
    md, ex = out.metadata, out.executable
    assert ex["programs"]["main"] == [{"op": "Switch", "index_anchor": "index", "cases": ["graph0", "graph1"]}]
    assert [s["program"] for s in ex["subgraphs"]] == ["graph0", "graph1"]
    assert ex["arena_bytes"] == max(p.size for p in plans)
    assert [(a["name"], a["subgraph"]) for a in md["anchors"]] == [
        ("index", None), ("graph0/X", 0), ("graph0/O", 0), ("graph1/X", 1), ("graph1/O", 1)]
    assert md["anchors"][3]["aliases"] == ["graph1/stream0"]
    ids = [t["id"] for t in ex["tensors"]]
    assert ids == list(range(len(ids)))
    g1_ids = {t["id"] for t in ex["tensors"] if t["name"].startswith("graph1/")}
    assert all(set(s["inputs"]) | set(s["outputs"]) <= g1_ids for s in ex["programs"]["graph1"])
    PopefFile(out.data)  # reads back
