"""Fused executables: main is a Switch over two subgraphs with different batch sizes; the `index`
input selects the subgraph (any integer dtype, shape [] or [1])."""
import datetime
import threading

import numpy as np
import pytest

from popef_builders import fused_expected, fused_model
from tf_popef_op import runtime

SHAPES = {0: (4, 2), 1: (2, 3)}


def rand(shape, seed=None):
    return np.random.default_rng(seed).uniform(0, 1, shape).astype(np.float32)


def request(index, x, y, index_value):
    return {f"graph{index}/stream0": x, f"graph{index}/stream1": y, "index": index_value}


@pytest.fixture
def lenient():
    with runtime.ModelRunner(fused_model(), runtime.RuntimeConfig(validate_io_params=False)) as runner:
        yield runner


@pytest.mark.parametrize("make_index", [
    lambda i: np.array([i], dtype=np.uint8),
    lambda i: np.array(i, dtype=np.uint8),
    lambda i: np.array([i], dtype=np.int64),
    lambda i: np.int64(i),
    lambda i: np.array([i], dtype=np.int32),
    lambda i: np.array(i, dtype=np.uint64),
    lambda i: i,  # a Python int becomes an int64 scalar
], ids=["uint8[1]", "uint8[]", "int64[1]", "int64[]", "int32[1]", "uint64[]", "int"])
def test_index_dtypes_and_shapes(lenient, make_index):
    for index in (0, 1):
        x, y = rand(SHAPES[index], index), rand(SHAPES[index], index + 10)
        out = lenient.execute(request(index, x, y, make_index(index)))
        assert set(out) == {f"graph{index}/O"}
        np.testing.assert_array_equal(out[f"graph{index}/O"], fused_expected(index, x, y))


def test_subgraph_batch_sizes(lenient):
    # graph0 compiled batch 4, graph1 batch 2; batching off: multiples only.
    x = rand((8, 2))
    np.testing.assert_array_equal(lenient.execute(request(0, x, x, 0))["graph0/O"], 2 * x)
    x = rand((6, 3))
    np.testing.assert_array_equal(lenient.execute(request(1, x, x, 1))["graph1/O"], (2 * x) * x)
    with pytest.raises(runtime.InvalidArgumentError, match="not a multiple of the compiled batch size 2"):
        lenient.execute(request(1, rand((3, 3)), rand((3, 3)), 1))
    sg = lenient.subgraphs
    assert [s["batch_size"] for s in sg] == [4, 2]
    assert [s["program"] for s in sg] == ["graph0", "graph1"]


@pytest.mark.parametrize("value", [5, 2, -1, np.uint64(2 ** 63 + 5)])
def test_index_out_of_range(lenient, value):
    x = rand((4, 2))
    with pytest.raises(runtime.InvalidArgumentError) as info:
        lenient.execute(request(0, x, x, np.array([value])))
    assert str(info.value) == f"index {int(value)} out of range: the executable has 2 subgraphs (0..1)"


def test_index_errors(lenient):
    x = rand((4, 2))
    with pytest.raises(runtime.InvalidArgumentError) as info:
        lenient.execute({"graph0/stream0": x, "graph0/stream1": x})
    assert str(info.value) == ("missing input 'index': this fused executable needs it to select the "
                               "subgraph (0..1)")
    with pytest.raises(runtime.InvalidArgumentError, match="input 'index': expected an integer dtype, got float32"):
        lenient.execute(request(0, x, x, np.array([0.0], np.float32)))
    with pytest.raises(runtime.InvalidArgumentError, match=r"input 'index': expected shape \[\] or \[1\], got \[2\]"):
        lenient.execute(request(0, x, x, np.array([0, 1])))


def test_aliases(lenient):
    x, y = rand((2, 3), 1), rand((2, 3), 2)
    out = lenient.execute({"graph1/X": x, "graph1/Y": y, "index": 1})
    np.testing.assert_array_equal(out["graph1/O"], (x + y) * x)
    with pytest.raises(runtime.InvalidArgumentError, match=r"anchor 'graph1/stream0' is given twice"):
        lenient.execute({"graph1/X": x, "graph1/stream0": x, "graph1/Y": y, "index": 1})


def test_descriptors_list_index_as_shared():
    with runtime.ModelRunner(fused_model()) as runner:
        inputs = {d.name: d for d in runner.get_execute_inputs()}
        assert inputs["index"].subgraph is None and inputs["index"].dtype == "int32"
        assert inputs["graph1/stream0"].subgraph == 1 and inputs["graph1/stream0"].aliases == ["graph1/X"]
        assert [d.name for d in runner.get_execute_outputs()] == ["graph0/O", "graph1/O"]


def test_validate_io_params_true_requires_exactly_the_subgraph_inputs():
    with runtime.ModelRunner(fused_model()) as runner:
        x0, x1 = rand((4, 2)), rand((2, 3))
        # Exactly the selected subgraph's inputs + index: fine.
        np.testing.assert_array_equal(runner.execute(request(1, x1, x1, 1))["graph1/O"], 2 * x1 * x1)
        # Anchors of the other subgraph are refused, named.
        with pytest.raises(runtime.InvalidArgumentError) as info:
            runner.execute({**request(1, x1, x1, 1), "graph0/stream0": x0})
        assert str(info.value) == (
            "the request does not match the anchors of subgraph 1 ('graph1'): not anchors of this subgraph: "
            "'graph0/stream0' (set validate_io_params=False to ignore anchors of other subgraphs)")
        # Missing and foreign together are both named.
        with pytest.raises(runtime.InvalidArgumentError) as info:
            runner.execute({"graph0/stream0": x0, "graph1/stream1": x1, "index": 0})
        assert str(info.value) == (
            "the request does not match the anchors of subgraph 0 ('graph0'): missing input 'graph0/stream1'; "
            "not anchors of this subgraph: 'graph1/stream1' (set validate_io_params=False to ignore anchors of "
            "other subgraphs)")
        # A foreign output buffer is refused too.
        with pytest.raises(runtime.InvalidArgumentError, match="not anchors of this subgraph: 'graph0/O'"):
            runner.execute(request(1, x1, x1, 1), {"graph0/O": np.zeros((4, 2), np.float32)})


def test_validate_io_params_false_ignores_other_subgraphs(lenient):
    x0, x1 = rand((4, 2), 1), rand((2, 3), 2)
    o0 = np.zeros((4, 2), np.float32)
    # Feeding every anchor (as a generic client might) runs only the selected subgraph.
    feed = {**request(0, x0, x0, 1), **request(1, x1, x1, 1)}
    out = lenient.execute(feed, {"graph0/O": o0})
    assert set(out) == {"graph1/O"}
    np.testing.assert_array_equal(out["graph1/O"], 2 * x1 * x1)
    assert not o0.any()  # graph0 did not run
    # A missing input of the selected subgraph is still an error, never a hang.
    with pytest.raises(runtime.InvalidArgumentError) as info:
        lenient.execute({"graph1/stream0": x1, "index": 1})
    assert str(info.value) == "missing input 'graph1/stream1' of subgraph 1 ('graph1')"
    # And an unknown name too.
    with pytest.raises(runtime.InvalidArgumentError, match="unknown anchor name 'graph2/stream0'"):
        lenient.execute({**request(1, x1, x1, 1), "graph2/stream0": x1})


def test_fused_dynamic_batching_interleaved_from_threads():
    cfg = runtime.RuntimeConfig(batching_dim=0, validate_io_params=False,
                                timeout_ns=datetime.timedelta(milliseconds=2))
    with runtime.ModelRunner(fused_model(), cfg) as runner:
        errors = []

        def client(t):
            try:
                rng = np.random.default_rng(t)
                for i in range(20):
                    index = int(rng.integers(0, 2))
                    n = int(rng.integers(1, 6))
                    cols = SHAPES[index][1]
                    x, y = rand((n, cols), t * 100 + i), rand((n, cols), t * 100 + i + 50)
                    out = runner.execute(request(index, x, y, np.uint8(index)))[f"graph{index}/O"]
                    np.testing.assert_array_equal(out, fused_expected(index, x, y))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=client, args=(t,)) for t in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert runner.stats()["requests"] == 120


def test_scalar_index_anchor_compiled_as_uint8_scalar():
    with runtime.ModelRunner(fused_model(index_dtype="uint8", index_shape=()),
                             runtime.RuntimeConfig(validate_io_params=False)) as runner:
        x = rand((4, 2))
        np.testing.assert_array_equal(runner.execute(request(0, x, x, np.array([0], np.int16)))["graph0/O"], 2 * x)
