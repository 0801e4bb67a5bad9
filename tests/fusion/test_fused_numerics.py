"""2-, 3- and 16-model fusion with mixed precisions, opsets and input names: every subgraph's
results match onnxruntime on its original model, and only the selected subgraph runs."""
import numpy as np
import pytest

from compiler.fusion import fuse_models
from fused_runs import make_feeds, run_and_check
from fusion_test_models import gated_model, mlp_model, softmax3d_model, tutorial_model0, tutorial_model1, zoo
from tf_popef_op.runtime import InvalidArgumentError, ModelRunner, RuntimeConfig


def test_two_models_tutorial_values():
    entries = [dict(input_model=tutorial_model0(), input_shape=["X=1,2", "Y=1,2"]),
               dict(input_model=tutorial_model1(), input_shape=["X=1,1"], precision="fp16")]
    exe = fuse_models(entries)
    with ModelRunner(exe, RuntimeConfig(validate_io_params=False)) as runner:
        out = runner.execute({"index": np.array([0], np.uint8), "graph0/stream0": np.ones((1, 2), np.float32),
                              "graph0/stream1": np.full((1, 2), 2, np.float32)})
        np.testing.assert_array_equal(out["graph0/O"], [3, 3])
        out = runner.execute({"index": np.array([1], np.uint8), "graph1/stream0": np.zeros((1, 1), np.float16)})
        assert out["graph1/O"].dtype == np.float16
        np.testing.assert_array_equal(out["graph1/O"], [[0, 1.5, 2]])
        rng = np.random.default_rng(0)
        for index, entry in enumerate(entries):
            run_and_check(runner, exe, index, entry["input_model"], rng)


def test_three_models_mixed_opsets_names_and_precisions():
    entries = [dict(input_model=mlp_model("in0", "probs", (6, 10, 3), seed=3, opset=13), batch_size=2),
               dict(input_model=gated_model(("x1", "gate"), seed=4, opset=17), batch_size=3, precision="fp16"),
               dict(input_model=softmax3d_model("features", opset=11), batch_size=2, name="sm")]
    exe = fuse_models(entries)
    rng = np.random.default_rng(1)
    with ModelRunner(exe, RuntimeConfig()) as runner:  # validate_io_params on: exact subgraph inputs
        for _ in range(2):
            for index in (2, 0, 1):  # any order, repeatedly
                run_and_check(runner, exe, index, entries[index]["input_model"], rng)
        # The original input names work as aliases of the stream names.
        run_and_check(runner, exe, 1, entries[1]["input_model"], rng, use_aliases=True)


def test_softmax_keeps_each_models_opset_semantics():
    # Same graph, opset 11 (softmax over dims 1..2 flattened) vs 13 (over dim 1): results differ.
    entries = [dict(input_model=softmax3d_model("f", opset=11), batch_size=1),
               dict(input_model=softmax3d_model("f", opset=13), batch_size=1)]
    exe = fuse_models(entries)
    x = np.random.default_rng(2).uniform(-1, 1, (1, 3, 4)).astype(np.float32)
    with ModelRunner(exe, RuntimeConfig()) as runner:
        old = runner.execute({"index": 0, "graph0/stream0": x})["graph0/flat"]
        new = runner.execute({"index": 1, "graph1/stream0": x})["graph1/flat"]
    np.testing.assert_allclose(old.sum(), 1.0, rtol=1e-5)
    np.testing.assert_allclose(new.sum(), 4.0, rtol=1e-5)


def test_sixteen_models():
    entries = zoo(16)
    exe = fuse_models(entries)
    rng = np.random.default_rng(3)
    with ModelRunner(exe, RuntimeConfig(validate_io_params=False)) as runner:
        assert [s["name"] for s in runner.subgraphs] == [f"graph{i}" for i in range(16)]
        for index in list(range(16)) + [15, 0, 7]:
            run_and_check(runner, exe, index, entries[index]["input_model"], rng)


def test_only_the_selected_subgraph_runs():
    entries = [dict(input_model=mlp_model(seed=1), batch_size=2), dict(input_model=mlp_model(seed=2), batch_size=2)]
    exe = fuse_models(entries)
    rng = np.random.default_rng(4)
    feed0, _ = make_feeds(exe, 0, entries[0]["input_model"], rng)
    feed1, _ = make_feeds(exe, 1, entries[1]["input_model"], rng)
    untouched = np.full((2, 4), -7, np.float32)
    with ModelRunner(exe, RuntimeConfig(validate_io_params=False)) as runner:
        out = runner.execute({**feed0, **feed1, "index": np.array([1], np.int64)}, {"graph0/Y": untouched})
        assert set(out) == {"graph1/Y"} and (untouched == -7).all()
    with ModelRunner(exe, RuntimeConfig()) as strict:
        with pytest.raises(InvalidArgumentError, match="not anchors of this subgraph: 'graph0/stream0'"):
            strict.execute({**feed1, "graph0/stream0": feed0["graph0/stream0"]})
