"""Feeding one subgraph of a fused executable and checking it against onnxruntime."""
from typing import Dict, Optional, Tuple

import numpy as np

from compiler import Executable
from fusion_test_models import model_input_dtype, ort_outputs

FP32_TOL = dict(rtol=1e-5, atol=1e-5)
FP16_TOL = dict(rtol=1e-2, atol=1e-2)


def subgraph_info(exe: Executable, index: int) -> dict:
    return exe.opaque_json("fusion")["subgraphs"][index]


def make_feeds(exe: Executable, index: int, model, rng: np.random.Generator, rows: Optional[int] = None,
               use_aliases: bool = False) -> Tuple[Dict[str, np.ndarray], Dict[str, np.ndarray]]:
    """(fused feed incl. `index`, onnxruntime feed for the original model) with the same values.
    rows: the batch (dim batch_axis) to send, default the compiled one."""
    info = subgraph_info(exe, index)
    anchors = {a["name"]: a for a in exe.anchors()}
    fused = {"index": np.array([index], np.int32)}
    original = {}
    for name, orig in info["inputs"].items():
        a = anchors[name]
        shape = list(a["shape"])
        if rows is not None and a["batch_axis"] >= 0:
            shape[a["batch_axis"]] = rows
        x = rng.uniform(-1, 1, shape).astype(a["dtype"])
        fused[a["aliases"][0] if use_aliases and a["aliases"] else name] = x
        original[orig] = x.astype(model_input_dtype(model, orig))
    return fused, original


def check_outputs(exe: Executable, index: int, model, got: Dict[str, np.ndarray], original_feed: dict) -> None:
    info = subgraph_info(exe, index)
    expected = ort_outputs(model, original_feed)
    tol = FP16_TOL if info["precision"] == "fp16" else FP32_TOL
    assert set(got) == set(info["outputs"]), (set(got), info["outputs"])
    for fused_name, orig in info["outputs"].items():
        g, e = got[fused_name], expected[orig]
        assert g.shape == e.shape, (fused_name, g.shape, e.shape)
        np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), err_msg=f"subgraph {index} {fused_name}",
                                   **tol)


def run_and_check(runner, exe: Executable, index: int, model, rng: np.random.Generator, rows: Optional[int] = None,
                  use_aliases: bool = False) -> None:
    fused, original = make_feeds(exe, index, model, rng, rows, use_aliases)
    check_outputs(exe, index, model, runner.execute(fused), original)
