"""ModelRunner basics on hand-written PopEF models: results, in-place outputs, descriptors,
request validation errors, execute_async, close, RuntimeConfig."""
import datetime
import gc

import numpy as np
import pytest

from popef_builders import add_model, binary_model, weight_model
from tf_popef_op import runtime


def rand(shape, dtype=np.float32, seed=None):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1, 1, shape).astype(dtype)


@pytest.fixture
def add_runner():
    with runtime.ModelRunner(add_model()) as runner:
        yield runner


def test_add_model_exact_result(add_runner):
    x, y = rand((4, 2), seed=1), rand((4, 2), seed=2)
    out = add_runner.execute({"X": x, "Y": y})
    assert set(out) == {"O"}
    assert out["O"].dtype == np.float32 and out["O"].shape == (4, 2)
    np.testing.assert_array_equal(out["O"], x + y)


def test_outputs_are_filled_in_place(add_runner):
    x, y = rand((4, 2), seed=3), rand((4, 2), seed=4)
    o = np.full((4, 2), np.nan, np.float32)
    out = add_runner.execute({"X": x, "Y": y}, {"O": o})
    assert out["O"] is o
    np.testing.assert_array_equal(o, x + y)


def test_runner_allocated_outputs_are_independent(add_runner):
    x = rand((4, 2), seed=5)
    first = add_runner.execute({"X": x, "Y": x})["O"]
    second = add_runner.execute({"X": x, "Y": np.zeros_like(x)})["O"]
    np.testing.assert_array_equal(first, 2 * x)
    np.testing.assert_array_equal(second, x)
    first[:] = 0  # writeable, owned by the array
    del second
    gc.collect()
    assert first.flags.writeable


@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int64"])
def test_dtypes(dtype):
    with runtime.ModelRunner(add_model(dtype=dtype)) as runner:
        x = (np.arange(8).reshape(4, 2) * 3).astype(dtype)
        y = (np.arange(8).reshape(4, 2) - 2).astype(dtype)
        out = runner.execute({"X": x, "Y": y})["O"]
        assert out.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(out, x + y)


def test_weights_and_arena():
    w = np.arange(8, dtype=np.float32).reshape(4, 2)
    with runtime.ModelRunner(weight_model(w)) as runner:
        x = rand((4, 2), seed=6)
        np.testing.assert_array_equal(runner.execute({"X": x})["O"], (x + w) * x)


def test_descriptors(add_runner):
    inputs = add_runner.get_execute_inputs()
    outputs = add_runner.get_execute_outputs()
    assert [d.name for d in inputs] == ["X", "Y"]
    assert [d.name for d in outputs] == ["O"]
    d = inputs[0]
    assert d.shape == [4, 2] and d.dtype == "float32" and d.subgraph == 0 and d.batch_axis == 0
    assert d.aliases == []
    assert d.numpy_data_type() == np.dtype(np.float32)
    assert repr(d) == "AnchorDescriptor(name='X', shape=[4, 2], dtype='float32', subgraph=0, batch_axis=0, aliases=[])"


def test_runner_properties(add_runner):
    assert add_runner.ipu_version == "ipu2"
    assert isinstance(add_runner.device_id, int)
    assert len(add_runner.executable_hash) == 16
    sg = add_runner.subgraphs
    assert sg == [{"index": 0, "name": "graph0", "program": "main", "batch_size": 4, "batch_axis": 0,
                   "inputs": ["X", "Y"], "outputs": ["O"], "batched": True, "dynamic_batch": False,
                   "run_batch_size": 4, "run_batch_axis": 0, "exact_shapes_reason": None}]
    assert "ModelRunner '<memory>' ipu2" in repr(add_runner)


def test_stats(add_runner):
    x = rand((8, 2))
    add_runner.execute({"X": x, "Y": x})
    s = add_runner.stats()
    assert s["requests"] == 1 and s["rows"] == 8 and s["batches_run"] == 2
    assert s["zero_copy_batches"] == 2 and s["staged_batches"] == 0 and s["padded_rows"] == 0
    assert s["load_count"] >= 1 and s["device_id"] == add_runner.device_id


def test_array_likes_and_non_contiguous_inputs(add_runner):
    base = rand((4, 4), seed=7)
    x = base[:, ::2]  # non-contiguous view
    assert not x.flags.c_contiguous
    y = [[1, 2], [3, 4], [5, 6], [7, 8]]
    with pytest.raises(runtime.InvalidArgumentError, match="input 'Y': expected dtype float32, got int64"):
        add_runner.execute({"X": x, "Y": y})  # lists keep numpy's dtype: no silent cast
    out = add_runner.execute({"X": x, "Y": np.asarray(y, np.float32)})
    np.testing.assert_array_equal(out["O"], x + np.asarray(y, np.float32))


def test_unknown_name(add_runner):
    x = rand((4, 2))
    with pytest.raises(runtime.InvalidArgumentError) as info:
        add_runner.execute({"X": x, "Y": x, "Z": x})
    assert str(info.value) == "unknown anchor name 'Z' (inputs: 'X', 'Y'; outputs: 'O')"


def test_missing_input(add_runner):
    with pytest.raises(runtime.InvalidArgumentError, match=r"missing input 'Y'"):
        add_runner.execute({"X": rand((4, 2))})


def test_output_given_as_input(add_runner):
    x = rand((4, 2))
    with pytest.raises(runtime.InvalidArgumentError, match=r"'O' is an output anchor; pass it in outputs"):
        add_runner.execute({"X": x, "Y": x, "O": x})


def test_wrong_dtype(add_runner):
    with pytest.raises(runtime.InvalidArgumentError) as info:
        add_runner.execute({"X": rand((4, 2), np.float64), "Y": rand((4, 2))})
    assert str(info.value) == "input 'X': expected dtype float32, got float64"


def test_wrong_shape(add_runner):
    with pytest.raises(runtime.InvalidArgumentError) as info:
        add_runner.execute({"X": rand((4, 3)), "Y": rand((4, 3))})
    assert "input 'X': expected shape [4, 2] (any size along batch axis 0), got [4, 3]" == str(info.value)


def test_unsupported_numpy_dtype(add_runner):
    with pytest.raises(runtime.InvalidArgumentError, match="numpy dtype complex64 has no PopEF equivalent"):
        add_runner.execute({"X": np.zeros((4, 2), np.complex64), "Y": rand((4, 2))})


def test_big_endian_rejected(add_runner):
    with pytest.raises(runtime.InvalidArgumentError, match="native byte order"):
        add_runner.execute({"X": rand((4, 2)).astype(">f4"), "Y": rand((4, 2))})


@pytest.mark.parametrize("bad,message", [
    (np.zeros((4, 2), np.float64), "output 'O': expected float32 [4, 2] for this request, got float64 [4, 2]"),
    (np.zeros((8, 2), np.float32), "output 'O': expected float32 [4, 2] for this request, got float32 [8, 2]"),
    (np.zeros((2, 4), np.float32).T, "output 'O': the array must be C-contiguous to be filled in place"),
    ([[0.0] * 2] * 4, "output 'O': expected a numpy.ndarray to fill in place, got list"),
])
def test_bad_output_buffers(add_runner, bad, message):
    x = rand((4, 2))
    with pytest.raises(runtime.InvalidArgumentError) as info:
        add_runner.execute({"X": x, "Y": x}, {"O": bad})
    assert str(info.value) == message


def test_read_only_output(add_runner):
    o = np.zeros((4, 2), np.float32)
    o.flags.writeable = False
    x = rand((4, 2))
    with pytest.raises(runtime.InvalidArgumentError, match="output 'O': the array is read-only"):
        add_runner.execute({"X": x, "Y": x}, {"O": o})


def test_non_string_keys(add_runner):
    with pytest.raises(TypeError, match="input names must be str"):
        add_runner.execute({0: rand((4, 2))})


def test_execute_async():
    with runtime.ModelRunner(add_model()) as runner:
        futures = []
        for i in range(10):
            x, y = rand((4, 2), seed=10 + i), rand((4, 2), seed=30 + i)
            futures.append((runner.execute_async({"X": x, "Y": y}), x + y))
        for future, expected in futures:
            assert future.wait() is True
            assert future.done()
            np.testing.assert_array_equal(future.result()["O"], expected)
            assert repr(future) == "<Future done>"


def test_execute_async_in_place_and_dropped_future():
    with runtime.ModelRunner(add_model()) as runner:
        x = rand((4, 2), seed=40)
        o = np.zeros((4, 2), np.float32)
        f = runner.execute_async({"X": x, "Y": x}, {"O": o})
        assert f.result(timeout=10)["O"] is o
        np.testing.assert_array_equal(o, 2 * x)
        # A future dropped before completion waits for its request before freeing the arrays.
        for _ in range(20):
            runner.execute_async({"X": rand((4, 2)), "Y": rand((4, 2))})
        gc.collect()
        assert runner.stats()["requests"] == 21


def test_close_and_context_manager():
    runner = runtime.ModelRunner(add_model())
    with runner as r:
        assert r is runner
    assert runner.closed
    x = rand((4, 2))
    with pytest.raises(runtime.FailedPreconditionError, match="ModelRunner is closed"):
        runner.execute({"X": x, "Y": x})
    runner.close()  # idempotent


def test_close_fails_pending_requests():
    """A batch waiting for more rows when the runner closes fails with a clear error."""
    cfg = runtime.RuntimeConfig(batching_dim=0, timeout_ns=datetime.timedelta(seconds=30))
    runner = runtime.ModelRunner(add_model(), cfg)
    x = rand((1, 2))
    future = runner.execute_async({"X": x, "Y": x})  # 1 of 4 rows: waits for 30 s
    assert not future.wait(timeout=0.05)
    runner.close()
    with pytest.raises(runtime.FailedPreconditionError, match="ModelRunner closed before the request ran"):
        future.result(timeout=10)
    assert runner.stats()["failed_requests"] == 1


def test_result_timeout():
    cfg = runtime.RuntimeConfig(batching_dim=0, timeout_ns=datetime.timedelta(seconds=30))
    with runtime.ModelRunner(add_model(), cfg) as runner:
        x = rand((1, 2))
        future = runner.execute_async({"X": x, "Y": x})
        with pytest.raises(runtime.DeadlineExceededError, match="did not complete within"):
            future.result(timeout=0.01)
        assert isinstance(runtime.DeadlineExceededError("x"), TimeoutError)


def test_runtime_config():
    c = runtime.RuntimeConfig()
    assert (c.timeout_ns, c.batching_dim, c.validate_io_params, c.ring_buffer_size_multiplier, c.thread_safe,
            c.device_id) == (5_000_000, 0xFFFFFFFF, True, 2, True, -1)
    assert c.batching_dim == runtime.BATCHING_OFF
    c.timeout_ns = datetime.timedelta(microseconds=300)
    assert c.timeout_ns == 300_000
    c.timeout_ns = 42
    assert c.timeout_ns == 42
    c.batching_dim = 1
    c.validate_io_params = False
    c.profile = False  # its default comes from TF_POPEF_PROFILE
    assert repr(c) == ("RuntimeConfig(timeout_ns=42, batching_dim=1, validate_io_params=False, "
                       "ring_buffer_size_multiplier=2, thread_safe=True, device_id=-1, spin_ns=20000, profile=False)")
    with pytest.raises(ValueError, match="timeout_ns must be >= 0"):
        c.timeout_ns = -1
    with pytest.raises(TypeError, match="timeout_ns must be an int"):
        c.timeout_ns = 1.5
    with pytest.raises(TypeError):
        c.batching_dim = -1
    k = runtime.RuntimeConfig(batching_dim=0, timeout_ns=datetime.timedelta(milliseconds=1), device_id=2)
    assert (k.batching_dim, k.timeout_ns, k.device_id) == (0, 1_000_000, 2)
    with pytest.raises(TypeError, match="RuntimeConfig has no option 'bogus'"):
        runtime.RuntimeConfig(bogus=1)


def test_bad_ring_buffer_multiplier():
    with pytest.raises(runtime.InvalidArgumentError, match="ring_buffer_size_multiplier must be at least 1"):
        runtime.ModelRunner(add_model(), runtime.RuntimeConfig(ring_buffer_size_multiplier=0))


def test_int_division_by_zero_is_defined():
    with runtime.ModelRunner(binary_model("Div", dtype="int32")) as runner:
        x = np.array([[7, -7], [1, 0], [5, 9], [-8, 3]], np.int32)
        y = np.array([[2, 2], [0, 0], [-5, 3], [3, -3]], np.int32)
        out = runner.execute({"X": x, "Y": y})["O"]
        np.testing.assert_array_equal(out, [[3, -3], [0, 0], [-1, 3], [-2, -1]])


def test_error_classes():
    assert issubclass(runtime.InvalidArgumentError, ValueError)
    assert issubclass(runtime.DataLossError, ValueError)
    assert issubclass(runtime.NotFoundError, FileNotFoundError)
    assert issubclass(runtime.UnimplementedError, NotImplementedError)
    for cls in (runtime.FailedPreconditionError, runtime.ResourceExhaustedError, runtime.InternalError):
        assert issubclass(cls, runtime.Error) and issubclass(cls, RuntimeError)
    e = runtime.error_from_code("RESOURCE_EXHAUSTED", "full")
    assert isinstance(e, runtime.ResourceExhaustedError) and e.code == "RESOURCE_EXHAUSTED" and str(e) == "full"


def test_kernel_ops():
    ops = runtime.kernel_ops()
    assert ops == sorted(ops)
    assert {"Add", "Sub", "Mul", "Div", "Reshape"} <= set(ops)
