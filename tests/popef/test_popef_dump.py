import json

import numpy as np
import pytest
from onnx import helper

from compiler import Compiler
from popef import dump
from compiler_test_helpers import F32, make_model, run_cli


@pytest.fixture(scope="module")
def popef_file(tmp_path_factory):
    nodes = [helper.make_node("Gemm", ["X", "W", "B"], ["g"], name="gemm", transB=1),
             helper.make_node("Relu", ["g"], ["O"], name="relu")]
    model = make_model(nodes, [("X", F32, [4, 3])], [("O", F32, [4, 2])],
                       {"W": np.ones((2, 3), np.float32), "B": np.zeros(2, np.float32)})
    path = tmp_path_factory.mktemp("dump") / "executable.popef"
    Compiler.compile(model, ["O"]).save(str(path))
    return str(path)


def test_text_sections(popef_file, capsys):
    assert dump.main([popef_file]) == 0
    text = capsys.readouterr().out
    for section in ("PopEF file:", "Metadata:", "Anchors (2):", "Programs:", "TensorData (2):", "Opaques (1):"):
        assert section in text
    assert "ipu version: ipu2" in text and "batch size: 4" in text and "format version 1.0" in text
    assert "device memory: weights 128 + arena 0 = 128 bytes" in text  # the fused Gemm writes O directly
    anchor_rows = [line.split() for line in text.splitlines() if line.startswith("  X ") or line.startswith("  O ")]
    assert ["X", "input", "float32", "[4,", "3]", "0", "0"] in anchor_rows
    assert ["O", "output", "float32", "[4,", "2]", "0", "0"] in anchor_rows
    # Gemm + Relu compiled into one fused step (docs/popef.md, internal ops), shown with its epilogue.
    assert ("[0] FusedGemm 'gemm': X, W, B -> O  alpha=1.0 beta=1.0 transA=0 transB=1 activation=\"Relu\" "
            "activation_params=[] has_bias=1 has_sum=0") in text
    assert "Relu 'relu'" not in text
    assert "[0] LoadTensorData W -> weights+0 (24 bytes)" in text
    assert "subgraph 0 'graph0': program main, batch size 4 (axis 0), inputs X -> outputs O" in text
    assert any(line.split()[:5] == ["W", "float32", "[2,", "3]", "24"] for line in text.splitlines() if line.strip())
    assert '"source_model"' in text and "compiler (" in text  # opaque pretty-printed


def test_json_document(popef_file, capsys):
    assert dump.main([popef_file, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["version"] == "1.0" and doc["size"] % 64 == 0
    assert [b["type"] for b in doc["blobs"]] == ["Metadata", "Executable", "TensorData", "TensorData", "Opaque"]
    assert doc["metadata"]["ipu_version"] == "ipu2" and doc["metadata"]["batch_size"] == 4
    assert [(a["name"], a["direction"], a["shape"]) for a in doc["anchors"]] == [("X", "input", [4, 3]),
                                                                                 ("O", "output", [4, 2])]
    assert [s["op"] for s in doc["programs"]["main"]] == ["FusedGemm"]
    assert doc["programs"]["main"][0]["inputs_names"] == ["X", "W", "B"]
    assert [(t["name"], t["dtype"], t["shape"], t["nbytes"], t["offset"]) for t in doc["tensor_data"]] == \
        [("W", "float32", [2, 3], 24, 0), ("B", "float32", [2], 8, 64)]
    assert doc["opaques"][0]["name"] == "compiler" and doc["opaques"][0]["json"]["passes"][-1] == "final_check"


def test_errors_exit_1_with_one_line_and_no_traceback(tmp_path):
    missing = run_cli([str(tmp_path / "nope.popef")], module="popef.dump")
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr.strip() == f"popef_dump: error: {tmp_path / 'nope.popef'}: file not found"
    bad = tmp_path / "bad.popef"
    bad.write_bytes(b"x" * 100)
    result = run_cli([str(bad)], module="popef.dump")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == f"popef_dump: error: {bad}: not a PopEF file (bad magic at offset 0)"
    empty = tmp_path / "empty.popef"
    empty.write_bytes(b"")
    result = run_cli([str(empty), "--json"], module="popef.dump")
    assert result.returncode == 1 and result.stderr.strip().endswith("empty.popef: empty file")


def test_runs_as_a_module(popef_file):
    result = run_cli([popef_file], module="popef.dump")
    assert result.returncode == 0 and "Anchors (2):" in result.stdout
