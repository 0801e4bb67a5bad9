"""What a PopEF looks like as serving signatures: one per subgraph, keyed by the original
models' input/output names, with the anchors, dtypes, shapes and batching the PopefExecute op
needs. Read from the PopEF (Metadata, the Executable's `subgraphs` table and, for fused
executables, the `fusion` Opaque) and the runtime's batching plan; no TensorFlow.

A subgraph is batched (its signature has an unknown batch dimension) when dynamic batching is
asked for, the PopEF has a batch axis, and the runtime batches it along that axis: a ModelRunner
of the runtime binding reports its SubgraphBatching::Plan (every anchor carries the batch along
the axis with one compiled size). A subgraph that fails it (e.g. the seeds' model0, whose output
is reshaped to (2,)) keeps its fixed compiled shapes, and `SubgraphSignature.fixed_reason` says
why.
"""
import dataclasses
import os
from typing import Dict, List, Optional

from popef.reader import PopefFile
from tf_popef_op import runtime

BATCHING_OFF = -1


@dataclasses.dataclass(frozen=True)
class TensorSignature:
    key: str                      # the signature's input/output key: the original model's name
    anchor: str                   # the PopEF anchor it feeds / comes from
    dtype: str                    # PopEF dtype name ("float32", "float16", ...)
    shape: List[Optional[int]]    # None marks the batch dimension of a batched subgraph


@dataclasses.dataclass(frozen=True)
class SubgraphSignature:
    name: str                     # signature name: the subgraph's name (YAML `name:`, default graph{i})
    index: int                    # the fused executable's `index` value; -1 for a single model
    inputs: List[TensorSignature]
    outputs: List[TensorSignature]
    batching_dim: int             # RuntimeConfig.batching_dim for the op; BATCHING_OFF if off
    batched: bool                 # True: any batch size along batching_dim
    fixed_reason: str = ""        # why the signature has fixed shapes, when batching was asked for
    compiled_batch: int = 0       # rows per execution along batching_dim (0 when not batched)


def _runtime_batching(popef_path: str, batching_dim: int) -> Dict[int, dict]:
    """The runtime's batching plan of every subgraph (SubgraphBatching::Plan), by subgraph index:
    the signatures promise exactly what the op's runner will do."""
    config = runtime.RuntimeConfig()
    config.batching_dim = batching_dim
    with runtime.ModelRunner(os.fspath(popef_path), config) as runner:
        return {sg["index"]: sg for sg in runner.subgraphs}


def read_signatures(popef_path: str, dynamic_batching: bool = True) -> List[SubgraphSignature]:
    """One SubgraphSignature per subgraph of the PopEF, in subgraph order."""
    popef = PopefFile.open(popef_path)
    metadata, executable = popef.metadata, popef.executable
    anchors: Dict[str, dict] = {a["name"]: a for a in metadata["anchors"]}
    fusion = popef.opaque_json("fusion")
    fused = fusion is not None
    fusion_by_index = {s["index"]: s for s in fusion["subgraphs"]} if fused else {}
    axis = metadata.get("batch_axis", -1)
    batching_dim = axis if dynamic_batching and axis is not None and axis >= 0 else BATCHING_OFF

    plans = _runtime_batching(popef_path, batching_dim) if batching_dim != BATCHING_OFF else {}
    signatures = []
    for sg in executable["subgraphs"]:
        index = sg["index"]
        origin = fusion_by_index.get(index, {})
        original = {**origin.get("inputs", {}), **origin.get("outputs", {})}
        plan = plans.get(index, {})
        batched = bool(plan.get("batched"))
        reason = plan.get("exact_shapes_reason") or ""

        def tensor(name: str) -> TensorSignature:
            a = anchors[name]
            shape = [None if batched and d == batching_dim else s for d, s in enumerate(a["shape"])]
            return TensorSignature(key=original.get(name, name), anchor=name, dtype=a["dtype"], shape=shape)

        inputs = [tensor(n) for n in sg["inputs"]]
        outputs = [tensor(n) for n in sg["outputs"]]
        for kind, group in (("input", inputs), ("output", outputs)):
            keys = [t.key for t in group]
            if len(set(keys)) != len(keys):
                raise ValueError(f"{popef_path}: subgraph '{sg['name']}' has two {kind}s with the same original "
                                 f"name: {keys}")
        signatures.append(SubgraphSignature(
            name=sg["name"], index=index if fused else -1, inputs=inputs, outputs=outputs,
            batching_dim=batching_dim, batched=batched,
            compiled_batch=plan["run_batch_size"] if batched else 0,
            fixed_reason=(f"subgraph '{sg['name']}' is exported with its fixed compiled shapes and batching off "
                          f"for its signature: {reason}") if reason else ""))
    if not signatures:
        raise ValueError(f"{os.fspath(popef_path)}: the PopEF has no subgraphs")
    return signatures
