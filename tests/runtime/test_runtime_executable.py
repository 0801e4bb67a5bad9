"""Executable validation: each inconsistency in Metadata/Executable JSON is refused with an error
naming the file and the field (or op/node), never a crash at run time."""
import copy

import numpy as np
import pytest

from popef_builders import add_model, fused_model, weight_model
from tf_popef_op import runtime


def _mutated(model, mutate):
    m = model.copy()
    mutate(m)
    return m


def _set(path, value):
    """Mutation setting metadata/executable field `path` ("executable.tensors.0.offset")."""
    def mutate(m):
        root, *keys = path.split(".")
        obj = getattr(m, root)
        for k in keys[:-1]:
            obj = obj[int(k)] if isinstance(obj, list) else obj[k]
        last = keys[-1]
        if isinstance(obj, list):
            obj[int(last)] = value
        elif value is _DELETE:
            del obj[last]
        else:
            obj[last] = value
    return mutate


_DELETE = object()

W = np.arange(8, dtype=np.float32).reshape(4, 2)

CASES = [
    # (model factory, mutation, exception, message fragment)
    (add_model, _set("metadata.ipu_version", _DELETE), runtime.InvalidArgumentError,
     "Metadata.ipu_version: missing required field"),
    (add_model, _set("metadata.anchors.0.dtype", "complex64"), runtime.InvalidArgumentError,
     "Metadata.anchors[0].dtype: unknown dtype 'complex64'"),
    (add_model, _set("metadata.anchors.0.shape", [4, -2]), runtime.InvalidArgumentError,
     "Metadata.anchors[0].shape[1]: expected a non-negative integer, got -2"),
    (add_model, _set("metadata.anchors.0.direction", "sideways"), runtime.InvalidArgumentError,
     "Metadata.anchors[0].direction: expected \"input\" or \"output\""),
    (add_model, _set("metadata.anchors.1.name", "X"), runtime.InvalidArgumentError,
     "name or alias 'X' is already used by anchor 'X'"),
    (add_model, _set("metadata.anchors.1.aliases", ["Y2", "Y2"]), runtime.InvalidArgumentError,
     "Metadata.anchors[1]: name or alias 'Y2' is already used by anchor 'Y'"),
    (add_model, _set("metadata.anchors.1.aliases", ["Y"]), runtime.InvalidArgumentError,
     "Metadata.anchors[1]: name or alias 'Y' is already used by anchor 'Y'"),
    (add_model, _set("executable.subgraphs.0.batch_size", 2), runtime.InvalidArgumentError,
     "Executable.subgraphs[0].batch_size: 2 on batch_axis 0 disagrees with anchor 'X' [4, 2] (batch axis 0)"),
    (add_model, _set("metadata.anchors.0.batch_axis", 5), runtime.InvalidArgumentError,
     "Metadata.anchors[0].batch_axis: expected an integer in [-1, 1], got 5"),
    (add_model, _set("metadata.num_ipus", 2), runtime.UnimplementedError, "needs 2 IPU(s)"),
    (add_model, _set("executable.version", 3), runtime.UnimplementedError,  # 2 adds If/Loop steps
     "Executable version 3 is not supported"),
    (add_model, _set("executable.tensors.0.anchor", "Z"), runtime.InvalidArgumentError,
     "Executable.tensors[0].anchor: 'Z' is not an anchor name"),
    (add_model, _set("executable.tensors.0.shape", [4, 3]), runtime.InvalidArgumentError,
     "tensor is float32 [4, 3] but anchor 'X' is float32 [4, 2]"),
    (add_model, _set("executable.tensors.2.storage", "input"), runtime.InvalidArgumentError,
     "tensor has storage 'input' but anchor 'O' is an output"),
    (add_model, _set("executable.tensors.1.id", 0), runtime.InvalidArgumentError,
     "Executable.tensors[1].id: duplicate tensor id 0"),
    (add_model, _set("executable.programs.main.0.inputs", [0, 9]), runtime.InvalidArgumentError,
     "Executable.programs.main[0].inputs: tensor id 9 is not in Executable.tensors"),
    (add_model, _set("executable.programs.main.0.op", "NoSuchOp"), runtime.UnimplementedError,
     "op 'NoSuchOp' (node 'add'): no emulator kernel for this op (supported: "),
    (add_model, _set("executable.programs.main.0.outputs", [0]), runtime.InvalidArgumentError,
     "a kernel may only write arena or output tensors"),
    (add_model, _set("executable.programs.main", []), runtime.InvalidArgumentError,
     "output anchor 'O' of subgraph 0 is never written by program 'main'"),
    (add_model, _set("executable.subgraphs.0.program", "nope"), runtime.InvalidArgumentError,
     "Executable.subgraphs[0].program: program 'nope' does not exist"),
    (add_model, _set("executable.subgraphs.0.inputs", ["X"]), runtime.InvalidArgumentError,
     "anchor 'Y' is not listed in the inputs/outputs of any subgraph"),
    (add_model, _set("executable.subgraphs.0.outputs", ["X"]), runtime.InvalidArgumentError,
     "Executable.subgraphs[0].outputs: anchor 'X' is an input anchor"),
    (add_model, _set("metadata.program_flow.main", ["missing"]), runtime.InvalidArgumentError,
     "Metadata.program_flow.main: program 'missing' does not exist"),
    (add_model, _set("metadata.device_memory.arena_bytes", 128), runtime.InvalidArgumentError,
     "Metadata.device_memory.arena_bytes: 128 disagrees with Executable.arena_bytes = 0"),
    (lambda: weight_model(W), _set("executable.tensors.2.offset", 64), runtime.InvalidArgumentError,
     "tensor 'h' (32 bytes at offset 64) does not fit in arena_bytes = 64"),
    (lambda: weight_model(W), _set("executable.tensors.1.offset", 8), runtime.InvalidArgumentError,
     "Executable.tensors[1].offset: 8 is not 64-byte aligned"),
    (lambda: weight_model(W), _set("executable.programs.load.0.tensor_data", "V"), runtime.InvalidArgumentError,
     "the file has no TensorData blob 'V'"),
    (lambda: weight_model(W), _set("executable.programs.load.0.nbytes", 16), runtime.InvalidArgumentError,
     "nbytes: 16 but TensorData 'W' has 32 bytes"),
    (lambda: weight_model(W), _set("executable.programs.load.0.offset", 64), runtime.InvalidArgumentError,
     "TensorData 'W' (32 bytes at offset 64) does not fit in weights_bytes = 64"),
    (lambda: weight_model(W), _set("metadata.tensor_data.0.shape", [2, 2]), runtime.InvalidArgumentError,
     "TensorData 'W' has 32 bytes but float32 [2, 2] needs 16"),
    (fused_model, _set("executable.programs.main.0.cases", ["graph1", "graph0"]), runtime.InvalidArgumentError,
     "Switch case 0 runs program 'graph1' but subgraph 0 has program 'graph0'"),
    (fused_model, _set("executable.programs.main.0.index_anchor", "graph0/O"), runtime.InvalidArgumentError,
     "anchor 'graph0/O' must be an integer input of shape [] or [1]"),
    (fused_model, _set("executable.programs.graph0.0.inputs", [0, 3]), runtime.InvalidArgumentError,
     "program 'graph0' step 'graph0/add' uses anchor 'graph1/stream0', which is not an anchor of subgraph 0"),
    (fused_model, _set("executable.programs.main", [{"op": "Add", "inputs": [0, 1], "outputs": [2]}]),
     runtime.InvalidArgumentError, "there are 2 subgraphs but the main program has no Switch step"),
]


@pytest.mark.parametrize("factory,mutate,exc,fragment", CASES, ids=[c[3][:60] for c in CASES])
def test_invalid_executable(factory, mutate, exc, fragment):
    model = _mutated(factory(), mutate)
    with pytest.raises(exc) as info:
        runtime.ModelRunner(model)
    message = str(info.value)
    assert fragment in message
    assert message.startswith("<memory>: ")  # names the file


def test_kernel_factory_error_names_op_and_node():
    model = add_model()
    model.executable["tensors"][1]["shape"] = [4, 3]
    model.metadata["anchors"][1]["shape"] = [4, 3]
    with pytest.raises(runtime.InvalidArgumentError) as info:
        runtime.ModelRunner(model)
    assert "program 'main' step #0: op 'Add' (node 'add')" in str(info.value)
    assert "not broadcastable" in str(info.value)


def test_index_anchor_may_be_listed_in_subgraph_inputs():
    model = fused_model()
    for sg in model.executable["subgraphs"]:
        sg["inputs"].append("index")
    with runtime.ModelRunner(model, runtime.RuntimeConfig(validate_io_params=False)) as runner:
        x = np.ones((2, 3), np.float32)
        out = runner.execute({"graph1/X": x, "graph1/Y": x, "index": np.uint8(1)})
        np.testing.assert_array_equal(out["graph1/O"], (x + x) * x)


def test_executable_hash_tracks_weights():
    a = runtime.ModelRunner(weight_model(W))
    b = runtime.ModelRunner(weight_model(W))
    c = runtime.ModelRunner(weight_model(W + 1))
    try:
        assert a.executable_hash == b.executable_hash
        assert a.executable_hash != c.executable_hash
    finally:
        for r in (a, b, c):
            r.close()


def _mutation_points(obj):
    """All (container, key) pairs of a JSON tree, to pick a mutation point from."""
    points = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            points.append((obj, k))
            points.extend(_mutation_points(v))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            points.append((obj, i))
            points.extend(_mutation_points(v))
    return points


JUNK = [None, -1, 0, 1, 3, 63, 64, 2 ** 31, 2 ** 62, 2 ** 64 + 1, -2 ** 63, 1.5, "", "X", "index", "main",
        "float16", "int8", "bool", "Switch", "LoadTensorData", "Reshape", "Concat", "Transpose", [], [0], [1, 1],
        [4, 2], [-1], {}, {"axis": 0}, True]


def fuzzed_models(count, seed=99):
    """Models with 1-3 random JSON fields replaced by junk: valid checksums, hostile contents."""
    rng = np.random.default_rng(seed)
    factories = [add_model, lambda: weight_model(W), fused_model, lambda: add_model(shape=(2, 4, 3))]
    for i in range(count):
        model = factories[i % len(factories)]()
        for _ in range(int(rng.integers(1, 4))):
            tree = model.metadata if rng.random() < 0.4 else model.executable
            points = _mutation_points(tree)
            container, key = points[int(rng.integers(0, len(points)))]
            if rng.random() < 0.15 and isinstance(container, dict):
                del container[key]
            else:
                container[key] = copy.deepcopy(JUNK[int(rng.integers(0, len(JUNK)))])
        yield model


def test_json_fuzz_never_crashes():
    """Hostile but well-formed files must fail with runtime.Error or run; a crash kills the run."""
    outcome = {"ok": 0, "error": 0}
    for model in fuzzed_models(800):
        try:
            with runtime.ModelRunner(model, runtime.RuntimeConfig(validate_io_params=False, batching_dim=0,
                                                                  timeout_ns=0)) as runner:
                feed = {d.name: np.zeros(d.shape, d.numpy_data_type()) for d in runner.get_execute_inputs()}
                try:
                    runner.execute(feed)
                except runtime.Error:
                    pass
            outcome["ok"] += 1
        except runtime.Error:
            outcome["error"] += 1
    assert outcome["error"] > 300 and outcome["ok"] > 0, outcome
