"""Fuzz target: the C++ PopEF reader, Executable parser, ModelRunner construction and one execute
with inputs matching the declared anchors, with a differential oracle.

Accepted outcomes: the runtime refuses the file (or the request) with one of its own error
types, other than InternalError; or it runs, and then
- the Python reader must accept the container too (the two readers agree on what is a PopEF);
- the outputs must match the output anchors the runner declares (names, dtypes, shapes);
- if the file still computes the same thing as a seed (same `program_fingerprint`), its outputs
  must equal that seed's outputs for the same inputs.

The fingerprint holds what legitimately decides the outputs: each program's kernel steps (op,
attrs, the dtype/shape/storage of every tensor read or written, which anchor an input/output
tensor binds to, and the bytes a weight tensor holds after the load programs ran, recomputed
here from the TensorData blobs), the control-flow steps and which program is main. It leaves out
everything the runtime must either check or not depend on: batch sizes and axes, anchor aliases
and subgraph fields, the TensorData table, arena offsets, device_memory, names. So a mutation
of weight bytes, an attribute or an edge gives a new fingerprint (no comparison: a different
program may compute anything), while a mutated batch size, offset, anchor list or program flow
that the runtime accepts must not change a single output value. Arena offsets are left out on
purpose: the runtime checks the plan (no two tensors live at once share bytes), so any plan it
accepts must give the seed's outputs bit for bit.
"""
import hashlib
import json
from typing import Dict, Optional

import numpy as np

from popef.format import BlobType, PopefError
from popef.reader import PopefFile
from tf_popef_op import runtime as rt

import seeds


class Finding(AssertionError):
    """A crash-free but wrong outcome: the fuzzer reports it like a crash."""


def _load_programs(meta: dict, programs: dict):
    flow = meta.get("program_flow")
    if flow is None:
        return ["load"] if "load" in programs else [], "main"
    return list(flow.get("load", [])), flow["main"][0]


def program_fingerprint(popef: PopefFile) -> Optional[str]:
    """A hash of what decides the outputs (see the module doc); None if the file is too odd to
    describe (then the oracle does not compare)."""
    try:
        meta, exe = popef.metadata, popef.executable
        programs = exe["programs"]
        tensors = {t["id"]: t for t in exe["tensors"]}
        payloads = {b.name: bytes(b.payload) for b in popef.blobs if b.type == BlobType.TENSOR_DATA}
        load, main = _load_programs(meta, programs)
        weights = bytearray(int(exe["weights_bytes"]))
        for name in load:
            for step in programs[name]:
                data = payloads[step["tensor_data"]]
                weights[step["offset"]:step["offset"] + len(data)] = data

        def tensor_key(tid):
            t = tensors[tid]
            key = [t["storage"], t["dtype"], list(t["shape"])]
            if t["storage"] in ("input", "output"):
                key.append(t["anchor"])
            elif t["storage"] == "weight":
                nbytes = int(np.prod(t["shape"], dtype=np.int64)) * np.dtype(t["dtype"]).itemsize
                key.append(hashlib.sha256(weights[t["offset"]:t["offset"] + nbytes]).hexdigest())
            else:
                key.append(tid)
            return key

        body = {"main": main, "subgraph_programs": [sg["program"] for sg in exe["subgraphs"]], "programs": {}}
        for name, steps in programs.items():
            if name in load:
                continue
            rendered = []
            for step in steps:
                if step["op"] in ("Switch", "If", "Loop"):
                    rendered.append(step)
                else:
                    rendered.append([step["op"], step.get("attrs", {}), [tensor_key(i) for i in step["inputs"]],
                                     [tensor_key(i) for i in step["outputs"]]])
            body["programs"][name] = rendered
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    except (PopefError, KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError):
        return None


def make_inputs(runner) -> Dict[str, np.ndarray]:
    """Deterministic values for the declared input anchors; a fused model's index selects its
    first subgraph and only that subgraph's inputs are fed."""
    feeds = {}
    for i, a in enumerate(runner.get_execute_inputs()):
        if a.subgraph not in (None, 0):
            continue
        dtype = a.numpy_data_type()
        rng = np.random.default_rng(i)
        if np.issubdtype(dtype, np.floating):
            feeds[a.name] = rng.uniform(-2, 2, a.shape).astype(dtype)
        elif dtype == np.bool_:
            feeds[a.name] = rng.integers(0, 2, a.shape).astype(bool)
        else:
            feeds[a.name] = np.zeros(a.shape, dtype)
    return feeds


class _Oracle:
    """Seed fingerprints, and each seed's outputs for given inputs."""

    def __init__(self):
        self.by_fingerprint = {}
        for name, data in seeds.popef_seeds().items():
            self.by_fingerprint.setdefault(program_fingerprint(PopefFile(data)), (name, data))

    def seed_data(self, name: str) -> bytes:
        return seeds.popef_seeds()[name]

    def expected(self, fingerprint: str, feeds: Dict[str, np.ndarray]):
        seed = self.by_fingerprint.get(fingerprint)
        if seed is None:
            return None, None
        name, data = seed
        with rt.ModelRunner(data) as runner:  # not kept: an open runner holds an emulated device
            # The mutated file may declare extra anchors that no program reads; the seed takes its own.
            wanted = {a.name for a in runner.get_execute_inputs()}
            return name, runner.execute({k: v for k, v in feeds.items() if k in wanted})


_oracle = None


def oracle() -> _Oracle:
    global _oracle
    if _oracle is None:
        _oracle = _Oracle()
    return _oracle


def _clean_refusal(error: Exception, stage: str) -> None:
    if isinstance(error, rt.InternalError):
        raise Finding(f"{stage}: internal error instead of a clear refusal: {error}") from error


def check(data: bytes) -> None:
    """Runs one input; returns on a clean outcome, raises Finding (or crashes) on a finding."""
    try:
        runner = rt.ModelRunner(data)
    except rt.Error as e:
        _clean_refusal(e, "ModelRunner")
        return
    with runner:
        try:
            python_view = PopefFile(data)
        except PopefError as e:
            raise Finding(f"the C++ reader accepted a file the Python reader refuses: {e}") from e
        feeds = make_inputs(runner)
        try:
            outputs = runner.execute(feeds)
        except rt.Error as e:
            _clean_refusal(e, "execute")
            return
        declared = {a.name: a for a in runner.get_execute_outputs()}
        for name, value in outputs.items():
            a = declared.get(name)
            if a is None or list(value.shape) != list(a.shape) or value.dtype != a.numpy_data_type():
                raise Finding(f"output '{name}' {value.dtype} {list(value.shape)} does not match its anchor {a}")
        fingerprint = program_fingerprint(python_view)
        if fingerprint is None:
            return
        seed, expected = oracle().expected(fingerprint, feeds)
        if expected is None:
            return
        if set(outputs) != set(expected):
            raise Finding(f"same program as seed '{seed}' but outputs {sorted(outputs)} instead of {sorted(expected)}")
        for name, value in expected.items():
            if not np.array_equal(outputs[name], value, equal_nan=True):
                raise Finding(f"same program as seed '{seed}' but output '{name}' differs: got {outputs[name]!r}, "
                              f"the seed gives {value!r}")


def seed_inputs():
    return list(seeds.popef_seeds().values())
