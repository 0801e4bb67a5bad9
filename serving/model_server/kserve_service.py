"""KServe v2 (Open Inference Protocol) semantics on the ServerCore, shared by the REST and
gRPC front ends: which model a v2 name means, metadata, readiness, inference, statistics and
the repository extension. Plain Python values in and out (numpy arrays, dicts); the front ends
decode and encode their wire formats.

Model names: a v2 model is one entry point of a served model version. `<model>` is its
default entry point (a SavedModel's `serving_default`, a PopEF's first subgraph) and
`<model>/<entry>` any of them (a SavedModel signature or a PopEF subgraph, so every subgraph
of a fused PopEF is its own v2 model with its own inputs and outputs). A name is first looked
up whole, so a served model whose own name holds a `/` is still found.
"""
import dataclasses
import threading
import time
import weakref
from typing import Dict, List, Optional, Sequence

import numpy as np

from serving.model_server import SERVER_VERSION
from serving.model_server.errors import (ServingError, as_serving_error, invalid_argument,
                                         not_found)
from serving.model_server.kserve_codec import datatype_of
from serving.model_server.kserve_metrics import TIMED_STAGES, TritonMetrics
from serving.model_server.popef_servable import Subgraph, TensorSpec, check_inputs

SERVER_NAME = "tf-popef"
EXTENSIONS = ("binary_tensor_data", "model_repository", "statistics")
_STATE_NAMES = {"AVAILABLE": "READY", "LOADING": "LOADING", "START": "LOADING",
                "UNLOADING": "UNLOADING", "END": "UNAVAILABLE"}


@dataclasses.dataclass
class Target:
    """What one v2 name resolves to."""
    name: str                 # the v2 model name as asked
    model: str                # the served model it belongs to
    servable: object
    entry: Subgraph


class _Statistics:
    """Per (v2 model, version) cumulative counts for ModelStatistics. The queue and compute
    durations are the runtime's timing of successful requests: present only for models whose
    requests the runtime runs and times (bare PopEFs)."""

    _TIMED = tuple((stage, f"{stage}_ns") for stage in TIMED_STAGES)

    def __init__(self):
        self._lock = threading.Lock()
        self._rows: Dict[tuple, dict] = {}
        self._sources = []

    def add_source(self, rows) -> None:
        """`rows()`: {(name, version): row} counted elsewhere (the native front end's fast
        path), added to these rows whenever they are read."""
        self._sources.append(rows)

    def record(self, name, version, ok: bool, rows: int, ns: int, timing=None) -> None:
        """`timing`: the runtime's Future.timing() of a request it ran, else None."""
        with self._lock:
            row = self._rows.get((name, version))
            if row is None:
                row = self._rows[(name, version)] = dict(
                    inference_count=0, execution_count=0, last_inference=0,
                    durations={"success": [0, 0], "fail": [0, 0]})
            durations = row["durations"]
            outcome = durations["success" if ok else "fail"]
            outcome[0] += 1
            outcome[1] += ns
            if ok:
                row["inference_count"] += rows
                row["execution_count"] += 1
                if timing is not None:
                    for stage, field in self._TIMED:
                        duration = durations.setdefault(stage, [0, 0])
                        duration[0] += 1
                        duration[1] += timing[field]
            row["last_inference"] = int(time.time() * 1000)

    def rows(self) -> Dict[tuple, dict]:
        """{(name, version): row}; row["inference_stats"]: {duration: {"count", "ns"}} in
        Triton's order, the queue and compute durations only where requests were timed."""
        with self._lock:
            snapshot = {key: dict(row, durations={d: tuple(v) for d, v in row["durations"].items()})
                        for key, row in self._rows.items()}
        for source in self._sources:
            for key, extra in source().items():
                row = snapshot.setdefault(key, dict(inference_count=0, execution_count=0,
                                                    last_inference=0, durations={}))
                row["inference_count"] += extra["inference_count"]
                row["execution_count"] += extra["execution_count"]
                row["last_inference"] = max(row["last_inference"], extra["last_inference"])
                for duration, (count, ns) in extra["durations"].items():
                    had = row["durations"].get(duration, (0, 0))
                    row["durations"][duration] = (had[0] + count, had[1] + ns)
        for row in snapshot.values():
            row["inference_stats"] = {d: {"count": count, "ns": ns}
                                      for d, (count, ns) in row.pop("durations").items()}
        return snapshot


def _signature_entry(servable, key: str) -> Subgraph:
    """A SavedModel signature as an entry point (names, numpy dtypes, -1 for unknown dims)."""
    import tensorflow as tf
    _, signature = servable.signature_def(key)

    def spec(alias, info):
        dtype = tf.as_dtype(info.dtype)
        shape = None if info.tensor_shape.unknown_rank else tuple(
            d.size for d in info.tensor_shape.dim)
        numpy_dtype = np.dtype(object) if dtype == tf.string else np.dtype(dtype.as_numpy_dtype)
        return TensorSpec(alias, info.name, numpy_dtype, shape)
    inputs = [spec(a, i) for a, i in sorted(signature.inputs.items())]
    outputs = [spec(a, i) for a, i in sorted(signature.outputs.items())]
    batched = inputs and all(s.shape and s.shape[0] == -1 for s in inputs)
    return Subgraph(key, -1, inputs, outputs, 0 if batched else -1, {})


class KServeV2:
    def __init__(self, core, metrics=None):
        """`metrics`: the server's ServerMetrics (TF Serving's names), to which the Triton
        names are added."""
        self.core = core
        self.metrics = metrics
        self.triton_metrics = TritonMetrics(metrics) if metrics is not None else None
        self.statistics = _Statistics()
        self._entries = weakref.WeakKeyDictionary()   # SavedModel servable -> {key: Subgraph}
        self._repository_lock = threading.Lock()
        self._unloaded = {}                           # name -> its ModelConfig entry

    # ---- server --------------------------------------------------------------------------
    def server_metadata(self) -> dict:
        return {"name": SERVER_NAME, "version": SERVER_VERSION, "extensions": list(EXTENSIONS)}

    def ready(self) -> bool:
        """Every configured model has a version available."""
        manager = self.core.manager
        for name in manager.model_names():
            try:
                rows = manager.status(name)
            except ServingError:
                return False
            if not any(state_name(state) == "READY" for _, state, _ in rows):
                return False
        return True

    # ---- models --------------------------------------------------------------------------
    def resolve(self, name: str, version: str = "") -> Target:
        from tensorflow_serving.apis import model_pb2
        if not name:
            raise invalid_argument("missing model name")
        model, entry = name, ""
        known = set(self.core.manager.model_names())
        if model not in known and "/" in name:
            model, entry = name.rsplit("/", 1)
        if model not in known:
            raise not_found(f"Request for unknown model: '{name}' is not found")
        spec = model_pb2.ModelSpec(name=model)
        if version:
            if not version.isdigit():
                raise invalid_argument(f"model '{name}': malformed version '{version}' (a "
                                       "non-negative integer)")
            spec.version.value = int(version)
        try:
            servable = self.core.manager.resolve(spec)
        except ServingError as error:
            if error.code.name == "NOT_FOUND":
                which = f"version {version}" if version else "no version"
                raise not_found(f"Request for unknown model: '{name}' {which} is not "
                                "available") from None
            raise
        if entry and entry not in self._entry_names(servable):
            raise not_found(f"Request for unknown model: '{name}' is not found ('{model}' has "
                            f"{', '.join(self._entry_names(servable))})")
        return Target(name, model, servable, self._entry(servable, entry))

    def _entry_names(self, servable) -> List[str]:
        if hasattr(servable, "subgraphs"):
            return list(servable.subgraphs)
        return list(servable.signature_defs)

    def _entry(self, servable, key: str) -> Subgraph:
        if hasattr(servable, "subgraphs"):
            return servable.subgraph(key)
        key, _ = servable.signature_def(key)
        cache = self._entries.setdefault(servable, {})
        entry = cache.get(key)
        if entry is None:
            entry = cache[key] = _signature_entry(servable, key)
        return entry

    def model_ready(self, name: str, version: str = "") -> bool:
        try:
            self.resolve(name, version)
        except ServingError:
            return False
        return True

    def model_metadata(self, name: str, version: str = "") -> dict:
        target = self.resolve(name, version)
        versions = [str(v) for v, state, _ in self.core.manager.status(target.model)
                    if state_name(state) == "READY"]
        platform = getattr(target.servable, "platform", "tensorflow_savedmodel")

        def tensors(specs):
            return [{"name": s.name, "datatype": datatype_of(s.dtype),
                     "shape": list(s.shape) if s.shape is not None else [-1]} for s in specs]
        return {"name": name, "versions": sorted(versions, key=int), "platform": platform,
                "inputs": tensors(target.entry.inputs), "outputs": tensors(target.entry.outputs)}

    # ---- inference -----------------------------------------------------------------------
    def infer(self, name: str, version: str, inputs: Dict[str, np.ndarray],
              outputs: Optional[Sequence[str]] = None, entrypoint: str = "GRPC"):
        """(Target, {output name: array}) of one request; `outputs` names the outputs wanted
        (None: all, in the entry point's order)."""
        start = time.perf_counter_ns()
        target = None
        try:
            target = self.resolve(name, version)
            entry = target.entry
            if outputs is not None:
                known = {s.name for s in entry.outputs}
                for wanted in outputs:
                    if wanted not in known:
                        raise invalid_argument(f"unexpected inference output '{wanted}' for "
                                               f"model '{name}' (outputs: "
                                               f"{', '.join(sorted(known))})")
            timing = None    # the runtime's timing, where it runs the request directly
            if hasattr(target.servable, "subgraphs"):   # a bare PopEF checks its inputs
                result, timing = target.servable.run_timed(entry.name, inputs, outputs)
            else:
                check_inputs(name, entry, inputs)
                result = target.servable.run(entry.name, inputs)
            names = [s.name for s in entry.outputs] if outputs is None else list(
                dict.fromkeys(outputs))
            result = {n: result[n] for n in names}
        except Exception as error:
            failure = as_serving_error(error)
            self._observe(name, target, False, inputs, start, entrypoint, failure.code.name)
            raise failure from None
        self._observe(name, target, True, inputs, start, entrypoint, "OK", timing)
        return target, result

    def _observe(self, name, target, ok, inputs, start, entrypoint, status, timing=None):
        elapsed = time.perf_counter_ns() - start
        version = str(target.servable.version) if target is not None else ""
        rows = 1
        if target is not None and target.entry.batch_axis >= 0 and inputs:
            first = next(iter(inputs.values()))
            if first.ndim > target.entry.batch_axis:
                rows = int(first.shape[target.entry.batch_axis])
        self.statistics.record(name, version, ok, rows, elapsed, timing)
        if self.metrics is not None:
            self.triton_metrics.request_done(name, version, ok, rows, elapsed / 1e3, timing)
            self.metrics.request_done("infer", target.model if target is not None else name, status,
                                      elapsed / 1e9, entrypoint)

    def model_statistics(self, name: str = "", version: str = "") -> List[dict]:
        """Triton's ModelStatistics (as JSON) of every v2 model that served requests."""
        if name:
            self.resolve(name, version)    # NOT_FOUND for an unknown model
        rows = []
        for (model, ver), row in sorted(self.statistics.rows().items()):
            if (name and model != name) or (version and ver != version):
                continue
            rows.append(dict(name=model, version=ver, **row))
        return rows

    # ---- repository extension ------------------------------------------------------------
    def repository_index(self, ready_only: bool = False) -> List[dict]:
        manager = self.core.manager
        index = []
        for model in sorted(set(manager.model_names()) | set(self._unloaded)):
            try:
                rows = manager.status(model)
            except ServingError:
                rows = []
            if not rows and not ready_only:
                index.append({"name": model, "version": "", "state": "UNAVAILABLE",
                              "reason": "unloaded"})
            for version, state, error in rows:
                state = state_name(state)
                if ready_only and state != "READY":
                    continue
                reason = error.message if error is not None else (
                    "unloaded" if state == "UNAVAILABLE" else "")
                index.append({"name": model, "version": str(version), "state": state,
                              "reason": reason})
        return index

    def unload(self, name: str) -> None:
        from tensorflow_serving.config import model_server_config_pb2
        with self._repository_lock:
            config = self.core.manager.config
            entries = list(config.model_config_list.config) if config is not None else []
            kept = [m for m in entries if m.name != name]
            if len(kept) == len(entries):
                raise not_found(f"failed to unload '{name}': no model of that name is loaded")
            self._unloaded[name] = next(m for m in entries if m.name == name)
            updated = model_server_config_pb2.ModelServerConfig()
            updated.model_config_list.config.extend(kept)
            self.core.reload_config(updated)

    def load(self, name: str) -> None:
        """Loads (or reloads) a model: one unloaded before, or a directory `name` next to the
        served models' base paths (the model repository)."""
        import os
        from tensorflow_serving.config import model_server_config_pb2
        with self._repository_lock:
            config = self.core.manager.config
            entries = list(config.model_config_list.config) if config is not None else []
            if not any(m.name == name for m in entries):
                entry = self._unloaded.get(name)
                if entry is None:
                    roots = sorted({os.path.dirname(os.path.abspath(m.base_path))
                                    for m in entries})
                    found = [os.path.join(r, name) for r in roots
                             if os.path.isdir(os.path.join(r, name))]
                    if not found:
                        raise not_found(f"failed to load '{name}': no model directory '{name}' "
                                        f"in the repository ({', '.join(roots) or 'empty'})")
                    entry = model_server_config_pb2.ModelConfig(
                        name=name, base_path=found[0], model_platform="tensorflow")
                entries.append(entry)
            updated = model_server_config_pb2.ModelServerConfig()
            updated.model_config_list.config.extend(entries)
            self.core.reload_config(updated)
            self._unloaded.pop(name, None)
            rows = self.core.manager.status(name)
        if not any(state_name(state) == "READY" for _, state, _ in rows):
            errors = [e.message for _, _, e in rows if e is not None]
            raise invalid_argument(f"failed to load '{name}': "
                                   f"{errors[0] if errors else 'no version could be loaded'}")


def state_name(state) -> str:
    from tensorflow_serving.apis import get_model_status_pb2
    name = get_model_status_pb2.ModelVersionStatus.State.Name(state)
    return _STATE_NAMES.get(name, name)
