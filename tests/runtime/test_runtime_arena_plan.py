"""The runtime's check of the arena plan (docs/popef.md "Arena plan"): two arena tensors live at
the same time may not share bytes, except a Reshape view on its input's bytes and a Concat input
on its slice of the output; If branches alternate; what a sub-program uses from outside is
live across the whole control step; a loop body's formals and results live through the whole
body. Hand-built plans for the rules, the
compiler's own control-flow plans (accepted, and refused once an offset is moved), and the fuzz
reproducer."""
import os

import numpy as np
import pytest

from compiler import Compiler
from popef.format import BlobType
from popef.reader import PopefFile
from popef.writer import encode_popef, json_payload
from tests.compiler import control_flow_models as models
from tests.compiler.compiler_test_helpers import ort_run
from tests.runtime.popef_builders import _model, anchor, with_edited_executable
from tf_popef_op import runtime

SHAPE = [4, 8]  # float32: 128 bytes, two 64-byte slots


def chain_model(offsets, view=False):
    """X -> a = X + X -> b = a * X -> c = b + X -> O = relu(c), the three temporaries in the arena
    at `offsets`; with `view`, b is read through r = reshape(b) (at r's own offset, offsets[3])."""
    t = lambda i, name, storage, **kw: dict(id=i, name=name, dtype="float32", shape=SHAPE, storage=storage, **kw)
    tensors = [t(0, "X", "input", anchor="X"), t(1, "a", "arena", offset=offsets[0]),
               t(2, "b", "arena", offset=offsets[1]), t(3, "c", "arena", offset=offsets[2]),
               t(4, "O", "output", anchor="O")]
    main = [{"op": "Add", "name": "add1", "inputs": [0, 0], "outputs": [1], "attrs": {}},
            {"op": "Mul", "name": "mul", "inputs": [1, 0], "outputs": [2], "attrs": {}}]
    b_read = 2
    if view:
        tensors.append(t(5, "r", "arena", offset=offsets[3]))
        main.append({"op": "Reshape", "name": "view", "inputs": [2], "outputs": [5], "attrs": {}})
        b_read = 5
    main += [{"op": "Add", "name": "add2", "inputs": [b_read, 0], "outputs": [3], "attrs": {}},
             {"op": "Relu", "name": "relu", "inputs": [3], "outputs": [4], "attrs": {}}]
    subgraphs = [{"index": 0, "name": "graph0", "program": "main", "batch_size": 4, "batch_axis": 0,
                  "inputs": ["X"], "outputs": ["O"]}]
    anchors = [anchor("X", "float32", SHAPE, "input"), anchor("O", "float32", SHAPE, "output")]
    return _model(anchors, tensors, {"main": main}, subgraphs, ipu_version="ipu2",
                  arena_bytes=max(offsets) + 128).to_bytes()


def chain_expected(x):
    return np.maximum((x + x) * x + x, 0)


def load_error(data):
    with pytest.raises(runtime.InvalidArgumentError) as info:
        runtime.ModelRunner(data)
    return str(info.value)


def run(data, feeds):
    with runtime.ModelRunner(data) as runner:
        return runner.execute(feeds)


X = np.linspace(-3, 3, 32, dtype=np.float32).reshape(SHAPE)


def test_a_plan_reusing_the_bytes_of_dead_tensors_is_accepted():
    # a dies at `mul`, so c (written later) takes its bytes; b overlaps neither while they live.
    got = run(chain_model([0, 128, 0]), {"X": X})
    np.testing.assert_array_equal(got["O"], chain_expected(X))


def test_two_live_tensors_sharing_bytes_are_refused_naming_both_and_the_step():
    message = load_error(chain_model([0, 64, 256]))
    assert ("arena plan: Executable.tensors[1] 'a' [0, 128) overlaps Executable.tensors[2] 'b' [64, 192) in the "
            "arena while both are live at step #1 (Mul 'mul') of program 'main'") in message
    assert ("'a' from step #0 (Add 'add1') of program 'main' to step #1 (Mul 'mul') of program 'main'; "
            "'b' from step #1 (Mul 'mul') of program 'main' to step #2 (Add 'add2') of program 'main'") in message


def test_a_step_output_on_its_own_input_is_refused():
    # The kernels read their inputs while writing: inputs and outputs of one step never share.
    message = load_error(chain_model([0, 0, 128]))
    assert "'a' [0, 128) overlaps Executable.tensors[2] 'b' [0, 128)" in message


def test_a_reshape_view_on_its_inputs_bytes_is_accepted():
    got = run(chain_model([0, 128, 256, 128], view=True), {"X": X})
    np.testing.assert_array_equal(got["O"], chain_expected(X))


def test_a_reshape_output_partly_on_its_input_is_refused():
    message = load_error(chain_model([0, 128, 384, 192], view=True))
    assert "'b' [128, 256) overlaps Executable.tensors[5] 'r' [192, 320)" in message
    assert "while both are live at step #2 (Reshape 'view')" in message


def test_a_view_keeps_its_source_live_until_the_view_is_last_read():
    # c is written at add2, where r (a view of b) is still read: c may not take b's bytes.
    message = load_error(chain_model([0, 128, 128, 128], view=True))
    assert "overlaps Executable.tensors[3] 'c' [128, 256)" in message
    assert "step #3 (Add 'add2')" in message


# ---------------------------------------------------------------- Concat inputs in place

PART = [1, 2, 8]  # float32: 64 bytes, one slot


def concat_model(offsets, inputs=("a", "b")):
    """a = relu(X), b = X + X, cat = Concat(inputs, axis 1), O = relu(cat); a, b, cat in the arena
    at `offsets` (in that order)."""
    t = lambda i, name, shape, storage, **kw: dict(id=i, name=name, dtype="float32", shape=shape, storage=storage,
                                                   **kw)
    out_shape = [1, 2 * len(inputs), 8]
    tensors = [t(0, "X", PART, "input", anchor="X"), t(1, "a", PART, "arena", offset=offsets[0]),
               t(2, "b", PART, "arena", offset=offsets[1]), t(3, "cat", out_shape, "arena", offset=offsets[2]),
               t(4, "O", out_shape, "output", anchor="O")]
    ids = {"a": 1, "b": 2}
    main = [{"op": "Relu", "name": "relu_a", "inputs": [0], "outputs": [1], "attrs": {}},
            {"op": "Add", "name": "add_b", "inputs": [0, 0], "outputs": [2], "attrs": {}},
            {"op": "Concat", "name": "cat", "inputs": [ids[n] for n in inputs], "outputs": [3], "attrs": {"axis": 1}},
            {"op": "Relu", "name": "relu", "inputs": [3], "outputs": [4], "attrs": {}}]
    subgraphs = [{"index": 0, "name": "graph0", "program": "main", "batch_size": 1, "batch_axis": 0,
                  "inputs": ["X"], "outputs": ["O"]}]
    anchors = [anchor("X", "float32", PART, "input"), anchor("O", "float32", out_shape, "output")]
    return _model(anchors, tensors, {"main": main}, subgraphs, ipu_version="ipu2",
                  arena_bytes=max(offsets) + 64 * len(inputs)).to_bytes()


XC = np.linspace(-3, 3, 16, dtype=np.float32).reshape(PART)
PARTS = {"a": np.maximum(XC, 0), "b": XC + XC}


@pytest.mark.parametrize("offsets", [[0, 64, 0], [0, 128, 0], [192, 64, 0], [128, 192, 128]],
                         ids=["both_in_place", "first_in_place", "second_in_place", "none_in_place"])
def test_concat_inputs_at_their_slices_of_the_output_are_accepted(offsets):
    got = run(concat_model(offsets), {"X": XC})
    np.testing.assert_array_equal(got["O"], np.maximum(np.concatenate([PARTS["a"], PARTS["b"]], axis=1), 0))


def test_a_concat_input_shifted_from_its_slice_is_refused_naming_both():
    # b belongs at [64, 128) of cat; at [0, 64) it is on a's slice.
    message = load_error(concat_model([128, 0, 0]))
    assert ("arena plan: Executable.tensors[2] 'b' [0, 64) overlaps Executable.tensors[3] 'cat' [0, 128) in the "
            "arena while both are live at step #2 (Concat 'cat') of program 'main'") in message


def test_a_concat_input_overlapping_another_slice_is_refused():
    message = load_error(concat_model([64, 192, 0]))
    assert ("Executable.tensors[1] 'a' [64, 128) overlaps Executable.tensors[3] 'cat' [0, 128) in the arena "
            "while both are live at step #2 (Concat 'cat')") in message


def test_an_input_listed_twice_is_in_place_once_and_copied_once():
    got = run(concat_model([0, 192, 0], inputs=("a", "a")), {"X": XC})
    np.testing.assert_array_equal(got["O"], np.concatenate([PARTS["a"], PARTS["a"]], axis=1))


# ---------------------------------------------------------------- control flow


def _compiled(model):
    return Compiler.compile(model.SerializeToString())


def _tensor(doc, name):
    return next(t for t in doc["tensors"] if t["name"] == name)


def _arena_names(doc, program):
    ids = {i for s in doc["programs"][program] for i in s.get("inputs", []) + s.get("outputs", [])}
    return [t["name"] for t in doc["tensors"] if t["id"] in ids and t["storage"] == "arena"]


@pytest.mark.parametrize("factory", [models.if_model, models.while_model, models.run_time_trip_count_model,
                                     models.if_in_loop_model, models.loop_in_loop_in_if_model,
                                     models.constant_branch_model])
def test_the_compilers_control_flow_plans_are_accepted(factory):
    executable = _compiled(factory())
    with runtime.ModelRunner(executable):
        pass


def test_a_loop_result_viewing_a_body_tensor_keeps_its_bytes_through_the_body():
    # The compiler gives a pinned result its own bytes; the runtime would refuse a plan that
    # let the later temporaries take them (they would clobber the result before the copy).
    model = models.loop_result_viewing_a_body_tensor_model()
    data = _compiled(model)
    x = np.array([1, 2, 3, 4], np.float32)
    for m in (0, 1, 3):
        feeds = {"x": x, "limit": np.array(100, np.float32), "M": np.array(m, np.int64)}
        np.testing.assert_array_equal(run(data, feeds)["h_final"], ort_run(model, feeds)[0])


@pytest.fixture(scope="module")
def if_executable():
    return _compiled(models.if_model())


def test_a_branch_tensor_on_the_bytes_of_the_condition_is_refused(if_executable):
    # The condition (an enclosing tensor used by the If step) is live across both branches.
    def edit(doc):
        _tensor(doc, "the_if/then/t0")["offset"] = _tensor(doc, "c")["offset"]
    message = load_error(with_edited_executable(if_executable, edit))
    assert "'c' [" in message and "'the_if/then/t0' [" in message
    assert "of program 'main/the_if/then'" in message


def test_tensors_of_the_two_branches_may_share_bytes(if_executable):
    # The compiler gives both branches one block: their tensors share bytes.
    doc = if_executable.executable
    assert _tensor(doc, "the_if/then/t0")["offset"] == _tensor(doc, "the_if/else/e_out")["offset"]
    data = if_executable.to_bytes()
    model = models.if_model()
    for x in (np.arange(6, dtype=np.float32).reshape(2, 3), -np.arange(6, dtype=np.float32).reshape(2, 3)):
        got = run(data, {"x": x})
        np.testing.assert_allclose(got["z"], ort_run(model, {"x": x})[0], rtol=1e-6)


@pytest.fixture(scope="module")
def while_executable():
    return _compiled(models.while_model())


def test_a_body_temporary_on_a_carried_body_input_is_refused(while_executable):
    # h_in is written by the Loop step around every iteration: live through the whole body,
    # even after its last read (hh), so the later temporary 'total' may not take its bytes.
    def edit(doc):
        body = next(s for s in doc["programs"]["main"] if s["op"] == "Loop")["body"]
        names = _arena_names(doc, body)
        h_in = next(n for n in names if n.endswith("/h_in"))
        total = next(n for n in names if n.endswith("/total"))
        _tensor(doc, total)["offset"] = _tensor(doc, h_in)["offset"]
    message = load_error(with_edited_executable(while_executable, edit))
    assert "h_in' [" in message and "total' [" in message and "of program 'main/the_while/body'" in message


def test_a_body_tensor_read_before_the_body_writes_it_lives_through_the_whole_body(while_executable):
    # The body reads 'total' (h_out = total + x) before ReduceSum writes it: the value read is
    # the previous iteration's, so no other tensor of the body may take its bytes meanwhile.
    def edit(doc):
        body = doc["programs"][next(s for s in doc["programs"]["main"] if s["op"] == "Loop")["body"]]
        ids = {t["name"].rsplit("/", 1)[-1]: t["id"] for t in doc["tensors"]}
        add = next(s for s in body if s["op"] == "Add" and s["inputs"][0] == ids["hh"])
        add["inputs"][0] = ids["total"]
        next(s for s in body if s["op"] == "Less")["inputs"][0] = ids["half"]
        _tensor(doc, "the_while/body/n_out")["offset"] = _tensor(doc, "the_while/body/total")["offset"]
    message = load_error(with_edited_executable(while_executable, edit))
    assert ("'the_while/body/total' from the start of program 'main/the_while/body' to the end of program "
            "'main/the_while/body'") in message


def test_a_loop_result_on_its_own_formals_bytes_is_refused():
    # The Loop step copies results into formals one by one: with a swap of two carried values,
    # a result sharing its formal's bytes would be overwritten before its copy.
    def edit(doc):
        _tensor(doc, "outer_loop/body/a_in:result")["offset"] = _tensor(doc, "outer_loop/body/a_in")["offset"]
    message = load_error(with_edited_executable(_compiled(models.if_in_loop_model()), edit))
    assert "'outer_loop/body/a_in' [" in message and "'outer_loop/body/a_in:result' [" in message


def test_a_sub_program_run_by_two_control_steps_is_refused(if_executable):
    def edit(doc):
        main = doc["programs"]["main"]
        step = next(s for s in main if s["op"] == "If")
        main.insert(main.index(step), dict(step, name="twin"))
    message = load_error(with_edited_executable(if_executable, edit))
    assert "program 'main/the_if/then' is run by" in message and "a sub-program must belong to one If or Loop" in message


def test_the_fuzz_reproducer_is_refused_by_the_arena_check():
    path = os.path.join(os.path.dirname(__file__), "..", "fuzz", "corpus", "runtime_popef",
                        "arena-tensors-live-at-once-overlap")
    with open(path, "rb") as f:
        message = load_error(f.read())
    assert "arena plan:" in message and "overlaps" in message


def _moved_offsets(executable, rng):
    """The executable with a doubled arena and one to four arena tensors moved to random aligned
    offsets."""
    popef = PopefFile(executable.to_bytes())
    doc, meta = popef.executable, popef.metadata
    doc["arena_bytes"] = meta["device_memory"]["arena_bytes"] = 2 * doc["arena_bytes"]
    meta["device_memory"].pop("total_bytes", None)
    arena = [t for t in doc["tensors"] if t["storage"] == "arena"]
    for t in rng.choice(arena, size=rng.integers(1, min(4, len(arena)) + 1), replace=False):
        nbytes = int(np.prod(t["shape"])) * np.dtype(t["dtype"]).itemsize
        t["offset"] = 64 * int(rng.integers(0, (doc["arena_bytes"] - nbytes) // 64 + 1))
    payload = {BlobType.EXECUTABLE: json_payload(doc), BlobType.METADATA: json_payload(meta)}
    return encode_popef([(b.type, b.name, payload.get(b.type, bytes(b.payload))) for b in popef.blobs])


@pytest.mark.parametrize("factory,feeds", [
    (models.if_in_loop_model, [{"x": np.array([1, 2], np.float32), "steps": np.array(s, np.int64),
                                "a": np.array([1, 2], np.float32), "b": np.array([3, 4], np.float32)}
                               for s in ([2, 3], [1, 0])]),
    (models.loop_in_loop_in_if_model, [{"x": np.array([1, -2, 3], np.float32), "steps": np.array(s, np.int64)}
                                       for s in ([1, 2], [-1, 0])]),
])
def test_every_accepted_plan_computes_the_compilers_outputs(factory, feeds):
    # Moved offsets are either refused by the arena check or change no output bit.
    executable = _compiled(factory())
    with runtime.ModelRunner(executable) as runner:
        want = [runner.execute(f) for f in feeds]
    rng = np.random.default_rng(0)
    outcomes = {"refused": 0, "accepted": 0}
    for _ in range(30):
        data = _moved_offsets(executable, rng)
        try:
            runner = runtime.ModelRunner(data)
        except runtime.InvalidArgumentError as e:
            assert "arena plan:" in str(e)
            outcomes["refused"] += 1
            continue
        with runner:
            for f, w in zip(feeds, want):
                got = runner.execute(f)
                for name, value in w.items():
                    np.testing.assert_array_equal(got[name], value, err_msg=name)
        outcomes["accepted"] += 1
    assert outcomes["refused"] and outcomes["accepted"], outcomes
