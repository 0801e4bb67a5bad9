"""Servable lifecycle: which versions are loaded, their states, labels, and lookup by ModelSpec.

Threading: `reconcile()` and `reload_config()` serialise on one lock (they run on the poll
thread or a ModelService call); lookups (`resolve`, `status`) take a short lock and return
immutable snapshots, so a request that already holds a Servable keeps using it while a new
version replaces it. Transitions preserve availability (TF Serving's
AvailabilityPreservingPolicy): new versions load and start serving before unaspired ones
unload, and the last available version of a model is kept until a replacement is available.
"""
import dataclasses
import logging
import threading
from typing import Callable, Dict, List, Optional, Tuple

from tensorflow_serving.apis import get_model_status_pb2

from serving.model_server.errors import (ServingError, as_serving_error, failed_precondition,
                                         invalid_argument, not_found)
from serving.model_server.model_config import validate_config
from serving.model_server.version_policy import aspired_versions
from serving.model_server.version_source import content_signature, versions_on_disk

State = get_model_status_pb2.ModelVersionStatus.State
log = logging.getLogger("popef_model_server")


@dataclasses.dataclass
class VersionRecord:
    state: int = State.START
    error: Optional[ServingError] = None
    servable: object = None
    failed_signature: Optional[Tuple] = None   # content_signature() of a failed load


@dataclasses.dataclass
class ModelRecord:
    config: object
    versions: Dict[int, VersionRecord] = dataclasses.field(default_factory=dict)
    labels: Dict[str, int] = dataclasses.field(default_factory=dict)


class ServableManager:
    """Owns every loaded Servable; `load_servable(name, version, path)` builds and loads one
    (the server wraps loading with warm-up and batching); `on_event(kind, name, version)`
    observes transitions (metrics, logs)."""

    def __init__(self, load_servable: Callable, allow_labels_for_unavailable: bool = False,
                 on_event: Optional[Callable] = None):
        self._load_servable = load_servable
        self._allow_unavailable_labels = allow_labels_for_unavailable
        self._observers = [on_event] if on_event else []
        self._lock = threading.Lock()
        self._reconcile_lock = threading.RLock()
        self._config = None
        self._models: Dict[str, ModelRecord] = {}
        self._retired: Dict[str, ModelRecord] = {}   # removed from config: END states stay visible

    def add_observer(self, on_event: Callable) -> None:
        """Another `on_event(kind, name, version)`, called after the ones before it."""
        self._observers.append(on_event)

    def _on_event(self, kind, name, version) -> None:
        for observe in self._observers:
            observe(kind, name, version)

    # ---- configuration -------------------------------------------------------------------
    @property
    def config(self):
        """The ModelServerConfig being served (None before the first reload_config)."""
        return self._config

    def reload_config(self, config) -> None:
        """Replaces the model set: loads what is new, unloads what is gone, then applies
        version labels. Raises ServingError; on a label error the models stay as loaded and
        the previous labels are kept (like ServerCore::ReloadConfig)."""
        validate_config(config)
        with self._reconcile_lock:
            self._config = config
            wanted = {m.name: m for m in config.model_config_list.config}
            with self._lock:
                for name, model in wanted.items():
                    record = self._models.get(name) or self._retired.pop(name, None)
                    if record is None:
                        record = ModelRecord(config=model)
                    record.config = model
                    self._models[name] = record
            self.reconcile()
            self._apply_labels(wanted)

    def _apply_labels(self, wanted) -> None:
        new_labels = {}
        for name, model in wanted.items():
            record = self._models[name]
            labels = dict(model.version_labels)
            for label, version in labels.items():
                entry = record.versions.get(version)
                available = entry is not None and entry.state == State.AVAILABLE
                if not available and not self._allow_unavailable_labels:
                    raise failed_precondition(
                        f"Request to assign label to version {version} of model {name}, "
                        "which is not currently available for inference (start the server "
                        "with --allow_version_labels_for_unavailable_models to allow it)")
            new_labels[name] = labels
        with self._lock:
            for name, labels in new_labels.items():
                self._models[name].labels = labels

    # ---- polling -------------------------------------------------------------------------
    def reconcile(self) -> None:
        """One pass of the version source: load aspired versions, then unload the rest."""
        with self._reconcile_lock:
            if self._config is None:
                return
            wanted = {m.name for m in self._config.model_config_list.config}
            plans = []
            for name in wanted:
                record = self._models[name]
                on_disk = versions_on_disk(record.config.base_path)
                aspired = aspired_versions(record.config.model_version_policy, on_disk)
                if not on_disk:
                    log.warning("No versions of servable %s found under base path %s",
                                name, record.config.base_path)
                plans.append((name, record, on_disk, aspired))
            for name, record, on_disk, aspired in plans:
                for version in aspired:
                    self._maybe_load(name, record, version, on_disk[version])
            for name, record, on_disk, aspired in plans:
                self._unload_unaspired(name, record, set(aspired))
            for name in [n for n in self._models if n not in wanted]:
                record = self._models[name]
                self._unload_unaspired(name, record, set(), keep_last=False)
                with self._lock:
                    self._retired[name] = self._models.pop(name)

    def _maybe_load(self, name, record, version, path) -> None:
        entry = record.versions.get(version)
        if entry is not None and entry.state in (State.AVAILABLE, State.LOADING):
            return
        signature = content_signature(path)
        if entry is not None and entry.failed_signature == signature:
            return  # failed before and unchanged on disk: do not retry every poll
        with self._lock:
            entry = VersionRecord(state=State.LOADING)
            record.versions[version] = entry
        self._on_event("loading", name, version)
        log.info("Loading servable version {name: %s version: %d} from %s", name, version, path)
        try:
            servable = self._load_servable(name, version, path)
        except Exception as error:  # a broken model must not take the server down
            failure = as_serving_error(error)
            log.error("Loading servable version {name: %s version: %d} failed: %s",
                      name, version, failure.message)
            with self._lock:
                record.versions[version] = VersionRecord(
                    state=State.END, error=failure, failed_signature=signature)
            self._on_event("load_failed", name, version)
            return
        with self._lock:
            record.versions[version] = VersionRecord(state=State.AVAILABLE, servable=servable)
        self._on_event("available", name, version)
        log.info("Successfully loaded servable version {name: %s version: %d}", name, version)

    def _unload_unaspired(self, name, record, aspired, keep_last=True) -> None:
        available = [v for v, e in record.versions.items() if e.state == State.AVAILABLE]
        to_unload = [v for v in available if v not in aspired]
        if keep_last and to_unload and not any(v in aspired for v in available):
            # No aspired version could be loaded: keep serving the newest old one.
            to_unload.remove(max(to_unload))
        for version in sorted(to_unload):
            with self._lock:
                entry = record.versions[version]
                entry.state = State.UNLOADING
            self._on_event("unloading", name, version)
            servable = entry.servable
            with self._lock:
                record.versions[version] = VersionRecord(state=State.END)
            if servable is not None and hasattr(servable, "unload"):
                servable.unload()
            self._on_event("unloaded", name, version)
            log.info("Unloaded servable version {name: %s version: %d}", name, version)

    # ---- lookups -------------------------------------------------------------------------
    def resolve(self, model_spec):
        """The Servable a ModelSpec asks for (latest available when no version is given)."""
        name = model_spec.name
        if not name:
            raise invalid_argument("Missing ModelSpec name")
        choice = model_spec.WhichOneof("version_choice")
        with self._lock:
            record = self._models.get(name)
            if choice == "version_label":
                label = model_spec.version_label
                if record is None or label not in record.labels:
                    raise invalid_argument(f"Unrecognized servable version label: {label}")
                version = record.labels[label]
                entry = record.versions.get(version)
                if entry is None or entry.state != State.AVAILABLE:
                    raise not_found(f"Servable not found for request: Specific({name}, "
                                    f"{version})")
                return entry.servable
            if choice == "version":
                version = model_spec.version.value
                entry = record.versions.get(version) if record else None
                if entry is None or entry.state != State.AVAILABLE:
                    raise not_found(f"Servable not found for request: Specific({name}, "
                                    f"{version})")
                return entry.servable
            available = [v for v, e in record.versions.items()
                         if e.state == State.AVAILABLE] if record else []
            if not available:
                raise not_found(f"Servable not found for request: Latest({name})")
            return record.versions[max(available)].servable

    def status(self, name: str, version: Optional[int] = None, label: Optional[str] = None):
        """[(version, state, ServingError or None)] of one model, newest first."""
        with self._lock:
            record = self._models.get(name) or self._retired.get(name)
            if record is None or not record.versions:
                raise not_found(f"Could not find any versions of model {name}")
            if label is not None:
                if label not in record.labels:
                    raise invalid_argument(f"Unrecognized servable version label: {label}")
                version = record.labels[label]
            if version is not None:
                entry = record.versions.get(version)
                if entry is None:
                    raise not_found(f"Could not find version {version} of model {name}")
                return [(version, entry.state, entry.error)]
            return [(v, e.state, e.error) for v, e in sorted(record.versions.items(),
                                                               reverse=True)]

    def available_servables(self) -> List[object]:
        with self._lock:
            return [e.servable for r in self._models.values() for e in r.versions.values()
                    if e.state == State.AVAILABLE]

    def model_names(self) -> List[str]:
        with self._lock:
            return sorted(self._models)

    def unload_all(self) -> None:
        with self._reconcile_lock:
            for name, record in list(self._models.items()):
                self._unload_unaspired(name, record, set(), keep_last=False)


class VersionPoller:
    """Calls `manager.reconcile()` every `interval_s` on a daemon thread (0 = never)."""

    def __init__(self, action: Callable[[], None], interval_s: float, name: str):
        self._action = action
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        if self._interval > 0:
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._action()
            except ServingError as error:
                log.error("%s: %s", self._thread.name, error.message)
            except Exception:  # keep polling; the next pass may succeed
                log.exception("%s failed", self._thread.name)
