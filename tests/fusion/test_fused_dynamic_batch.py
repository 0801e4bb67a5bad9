"""Dynamic batch size per subgraph: each subgraph keeps its own compiled batch size, and with
batching_dim set any number of rows is served by each."""
import numpy as np
import pytest

from compiler.fusion import fuse_models
from fused_runs import run_and_check
from fusion_test_models import mlp_model, softmax3d_model
from tf_popef_op.runtime import InvalidArgumentError, ModelRunner, RuntimeConfig


@pytest.fixture(scope="module")
def fused():
    entries = [dict(input_model=mlp_model("X", "Y", (8, 16, 4), seed=8), batch_size=2),
               dict(input_model=softmax3d_model("f", opset=11), batch_size=5, precision="fp16"),
               dict(input_model=mlp_model("Z", "P", (3, 7, 2), seed=9, opset=13), batch_size=1)]
    return entries, fuse_models(entries)


def test_each_subgraph_has_its_compiled_batch(fused):
    entries, exe = fused
    with ModelRunner(exe, RuntimeConfig(validate_io_params=False)) as runner:
        assert [(s["batch_size"], s["batch_axis"]) for s in runner.subgraphs] == [(2, 0), (5, 0), (1, 0)]
        rng = np.random.default_rng(0)
        # Batching off: multiples of each subgraph's own batch size are accepted.
        for index, rows in ((0, 4), (1, 10), (2, 3), (0, 2)):
            run_and_check(runner, exe, index, entries[index]["input_model"], rng, rows)
        with pytest.raises(InvalidArgumentError, match="not a multiple of the compiled batch size 5"):
            run_and_check(runner, exe, 1, entries[1]["input_model"], rng, 4)


def test_any_rows_per_subgraph_with_batching_dim(fused):
    entries, exe = fused
    with ModelRunner(exe, RuntimeConfig(batching_dim=0, validate_io_params=False)) as runner:
        rng = np.random.default_rng(1)
        for rows in (1, 3, 7, 11):
            for index in range(3):
                run_and_check(runner, exe, index, entries[index]["input_model"], rng, rows)
