"""popef_dump of a fused file: the `index` anchor under Anchors and the fusion map under
Opaques as readable tables (and the same content with --json)."""
import json

import pytest

from compiler.fusion import fuse_models
from popef import dump
from compiler_test_helpers import run_cli
from fusion_test_models import tutorial_model0, tutorial_model1


@pytest.fixture(scope="module")
def fused_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("fused") / "executable.popef"
    fuse_models([dict(input_model=tutorial_model0(), name="adder"),
                 dict(input_model=tutorial_model1(), precision="fp16")]).save(str(path))
    return str(path)


def rows(text, header_start):
    """The rows of the table whose header line starts with `header_start` (split on blanks)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(header_start))
    out = []
    for line in lines[start + 2:]:
        if not line.strip() or not line.startswith(" " * (len(lines[start]) - len(lines[start].lstrip()))):
            break
        out.append(line.split())
    return out


def test_text_shows_index_anchor_and_fusion_tables(fused_file):
    result = run_cli([fused_file], module="popef.dump")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    anchors = rows(text, "name            direction")
    assert anchors[0] == ["index", "input", "int32", "[1]", "shared", "-1"]
    assert ["graph0/stream0", "input", "float32", "[1,", "2]", "0", "0", "graph0/X"] in anchors
    assert "[0] Switch on 'index': cases graph0, graph1" in text
    assert "subgraph 0 'adder': program graph0" in text
    assert "fusion (" in text and "model fusion map, 2 subgraphs selected by input 'index' (int32 [1])" in text
    subgraphs = rows(text, "index  name")
    assert [r[:6] for r in subgraphs] == [["0", "adder", "fp32", "11", "1", "0"],
                                          ["1", "graph1", "fp16", "11", "1", "0"]]
    assert rows(text, "subgraph  fused anchor") == [
        ["0", "graph0/stream0", "input", "X", "graph0/X"],
        ["0", "graph0/stream1", "input", "Y", "graph0/Y"],
        ["0", "graph0/O", "output", "O"],
        ["1", "graph1/stream0", "input", "X", "graph1/X"],
        ["1", "graph1/O", "output", "O"]]
    assert '"subgraphs"' not in text.split("fusion (")[1].split("compiler (")[0]  # a table, not JSON


def test_json_has_the_map(fused_file, capsys):
    assert dump.main([fused_file, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["anchors"][0]["name"] == "index" and doc["anchors"][0]["subgraph"] is None
    fusion = next(o for o in doc["opaques"] if o["name"] == "fusion")["json"]
    assert fusion["subgraphs"][1]["inputs"] == {"graph1/stream0": "X"}


def test_an_unexpected_fusion_blob_is_shown_as_json():
    doc = {"file": "f", "size": 0, "blobs": [], "version": None, "metadata": None, "anchors": [], "programs": {},
           "subgraphs": [], "tensor_data": [], "opaques": [{"name": "fusion", "size": 9, "json": {"other": 1}}]}
    text = dump.render_text(doc)
    assert "  fusion (9 bytes)\n    {\n      \"other\": 1\n    }" in text
