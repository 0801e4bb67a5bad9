"""The fused PopEF's contents: index anchor, PopRT anchor names and aliases, one program per
subgraph behind a Switch, per-subgraph batch sizes, the subgraph table and the `fusion` map."""
import numpy as np
import onnx
from onnx import helper

from compiler import Compiler, CompilerOptions
from compiler.converter import DEFAULT_PIPELINE
from compiler.fusion import FusionEntry, fuse_models, lower_fused
from popef.reader import PopefFile
from compiler_test_helpers import F32, make_model
from fusion_test_models import gated_model, mlp_model, softmax3d_model, tutorial_model0, tutorial_model1, zoo


def tutorial_entries():
    return [dict(input_model=tutorial_model0(), input_shape=["X=1,2", "Y=1,2"], precision="fp32"),
            dict(input_model=tutorial_model1(), input_shape=["X=1,1"], precision="fp16")]


def test_tutorial_fusion_matches_poprt_names():
    exe = fuse_models(tutorial_entries())
    md, ex = exe.metadata, exe.executable
    assert [(a["name"], a["direction"], a["dtype"], a["shape"], a["subgraph"], a["batch_axis"], a["aliases"])
            for a in md["anchors"]] == [
        ("index", "input", "int32", [1], None, -1, []),
        ("graph0/stream0", "input", "float32", [1, 2], 0, 0, ["graph0/X"]),
        ("graph0/stream1", "input", "float32", [1, 2], 0, 0, ["graph0/Y"]),
        ("graph0/O", "output", "float32", [2], 0, -1, []),
        ("graph1/stream0", "input", "float16", [1, 1], 1, 0, ["graph1/X"]),
        ("graph1/O", "output", "float16", [1, 3], 1, 0, []),
    ]
    assert ex["programs"]["main"] == [{"op": "Switch", "index_anchor": "index", "cases": ["graph0", "graph1"]}]
    assert [(s["op"], s["name"]) for s in ex["programs"]["graph0"]] == [("Add", "graph0/Add_0"),
                                                                        ("Reshape", "graph0/Reshape_1")]
    assert ex["subgraphs"] == [
        {"index": 0, "name": "graph0", "program": "graph0", "batch_size": 1, "batch_axis": 0,
         "inputs": ["graph0/stream0", "graph0/stream1"], "outputs": ["graph0/O"]},
        {"index": 1, "name": "graph1", "program": "graph1", "batch_size": 1, "batch_axis": 0,
         "inputs": ["graph1/stream0"], "outputs": ["graph1/O"]}]
    # Tensor names carry the subgraph prefix, so they are unique in the file.
    names = [t["name"] for t in ex["tensors"]]
    assert len(names) == len(set(names)) and all(n.startswith(("graph0/", "graph1/")) for n in names)
    assert [t["name"] for t in md["tensor_data"]] == ["graph1/C"]  # model0's shape constant is folded away
    assert exe.opaque_json("fusion") == {
        "version": 1,
        "index_anchor": {"name": "index", "dtype": "int32", "shape": [1]},
        "subgraphs": [
            {"index": 0, "name": "graph0", "program": "graph0", "source_model": "<model 'graph'>", "precision": "fp32",
             "opset": 11, "batch_size": 1, "batch_axis": 0,
             "inputs": {"graph0/stream0": "X", "graph0/stream1": "Y"}, "outputs": {"graph0/O": "O"},
             "aliases": {"graph0/stream0": ["graph0/X"], "graph0/stream1": ["graph0/Y"]}},
            {"index": 1, "name": "graph1", "program": "graph1", "source_model": "<model 'graph'>", "precision": "fp16",
             "opset": 11, "batch_size": 1, "batch_axis": 0,
             "inputs": {"graph1/stream0": "X"}, "outputs": {"graph1/O": "O"},
             "aliases": {"graph1/stream0": ["graph1/X"]}}]}
    compiler_info = exe.opaque_json("compiler")
    assert [m["name"] for m in compiler_info["models"]] == ["graph0", "graph1"]
    assert compiler_info["models"][1]["converter_options"]["precision"] == "fp16"
    assert compiler_info["models"][0]["passes"][-1] == "final_check"
    PopefFile(exe.to_bytes())  # reads back


def test_names_subgraph_sizes_and_global_defaults(tmp_path):
    onnx.save(gated_model(("a", "b")), str(tmp_path / "gated.onnx"))
    entries = [FusionEntry(str(tmp_path / "gated.onnx"), batch_size=3, name="main"),  # program stays graph0
               FusionEntry(mlp_model(), name="scorer.v2"),  # batch from CompilerOptions
               FusionEntry(softmax3d_model(), batch_size=1, precision="fp16")]
    exe = Compiler.compile_fused(entries, CompilerOptions(batch_size=5, ipu_version="ipu21"))
    ex = exe.executable
    assert [(s["name"], s["program"], s["batch_size"]) for s in ex["subgraphs"]] == [
        ("main", "graph0", 3), ("scorer.v2", "graph1", 5), ("graph2", "graph2", 1)]
    assert set(ex["programs"]) == {"load", "main", "graph0", "graph1", "graph2", "save"}
    assert exe.metadata["ipu_version"] == "ipu21" and exe.metadata["batch_size"] == 3
    anchors = {a["name"]: a for a in exe.anchors()}
    # Two outputs, one transposed (no batch axis).
    assert anchors["graph0/out"]["shape"] == [3, 6] and anchors["graph0/out"]["batch_axis"] == 0
    assert anchors["graph0/summary"]["shape"] == [6, 3] and anchors["graph0/summary"]["batch_axis"] == -1
    assert anchors["graph1/stream0"]["shape"] == [5, 8] and anchors["graph1/stream0"]["aliases"] == ["graph1/X"]
    assert anchors["graph2/stream0"]["dtype"] == "float16" and anchors["graph2/stream0"]["aliases"] == [
        "graph2/features"]
    fusion = exe.opaque_json("fusion")["subgraphs"]
    assert fusion[0]["source_model"] == str(tmp_path / "gated.onnx")
    assert [(s["name"], s["opset"], s["precision"]) for s in fusion] == [
        ("main", 17, "fp32"), ("scorer.v2", 13, "fp32"), ("graph2", 11, "fp16")]


def test_one_model_is_still_a_fused_executable():
    exe = fuse_models([dict(input_model=tutorial_model0())])
    ex = exe.executable
    assert ex["programs"]["main"] == [{"op": "Switch", "index_anchor": "index", "cases": ["graph0"]}]
    assert [a["name"] for a in exe.anchors()] == ["index", "graph0/stream0", "graph0/stream1", "graph0/O"]


def test_sixteen_models():
    fused = lower_fused(zoo(16))
    ex = fused.popef.executable
    assert ex["programs"]["main"][0]["cases"] == [f"graph{i}" for i in range(16)]
    assert [s["batch_size"] for s in ex["subgraphs"]] == [[2, 3, 1, 4, 2][i % 5] for i in range(16)]
    assert ex["arena_bytes"] == max(p.size for p in fused.plans)
    precisions = [s["precision"] for s in PopefFile(fused.popef.data).opaque_json("fusion")["subgraphs"]]
    assert precisions == [["fp32", "fp16", "fp32", "fp16", "fp16"][i % 5] for i in range(16)]
    inputs = [a for a in fused.popef.metadata["anchors"] if a["direction"] == "input" and a["subgraph"] is not None]
    assert len({a["name"] for a in inputs}) == len(inputs)
    assert {a["name"].split("/")[0] for a in inputs} == {f"graph{i}" for i in range(16)}


def test_input_named_like_another_stream_keeps_no_alias():
    # Input 'stream1' at position 0 would alias graph0/stream1, the stream name of input 1.
    model = make_model([helper.make_node("Add", ["stream1", "b"], ["O"])],
                       [("stream1", F32, [1, 2]), ("b", F32, [1, 2])], [("O", F32, [1, 2])])
    exe = fuse_models([dict(input_model=model)])
    assert [(a["name"], a["aliases"]) for a in exe.anchors("input")] == [
        ("index", []), ("graph0/stream0", []), ("graph0/stream1", ["graph0/b"])]
    assert exe.opaque_json("fusion")["subgraphs"][0]["inputs"] == {"graph0/stream0": "stream1",
                                                                   "graph0/stream1": "b"}


def test_streams_keep_their_source_positions_when_an_unread_input_is_dropped():
    # PopRT numbers a model's streams by input position: dropping unread input 0 (an entry's
    # `passes` naming eliminate_unused_inputs) must not turn input 1 into stream0.
    model = make_model([helper.make_node("Relu", ["X"], ["O"])], [("unread", F32, [1, 2]), ("X", F32, [1, 2])],
                       [("O", F32, [1, 2])])
    exe = fuse_models([dict(input_model=model, passes=DEFAULT_PIPELINE + ["eliminate_unused_inputs"])])
    assert [(a["name"], a["aliases"]) for a in exe.anchors("input")] == [("index", []),
                                                                         ("graph0/stream1", ["graph0/X"])]
    assert exe.opaque_json("fusion")["subgraphs"][0]["inputs"] == {"graph0/stream1": "X"}


def test_output_that_is_a_constant_or_feeds_later_steps():
    nodes = [helper.make_node("Relu", ["X"], ["r"]), helper.make_node("Add", ["r", "X"], ["sum"])]
    model = make_model(nodes, [("X", F32, [2, 2])], [("r", F32, [2, 2]), ("sum", F32, [2, 2]), ("K", F32, [2])],
                       {"K": np.array([1.0, 2.0], np.float32)})
    exe = fuse_models([dict(input_model=tutorial_model1()), dict(input_model=model)])
    assert [a["name"] for a in exe.anchors("output")] == ["graph0/O", "graph1/r", "graph1/sum", "graph1/K"]
    steps = exe.executable["programs"]["graph1"]
    assert steps[-1]["op"] == "Reshape" and steps[-1]["name"] == "graph1/copy_to_output:K"


def test_compiling_twice_gives_the_same_bytes():
    assert fuse_models(tutorial_entries()).to_bytes() == Compiler.compile_fused(tutorial_entries()).to_bytes()
