"""Prometheus metrics with TF Serving's names, served on the REST port at the path of
`--monitoring_config_file` (`prometheus_config { enable: true path: "..." }`).

TF Serving's counters have no `_total` suffix (`:tensorflow:serving:request_count`), which
prometheus_client's Counter would add, so counters are exposed by a small collector;
histograms use prometheus_client's Histogram (latencies in microseconds, as TF Serving).
The emulator's own counters (device loads and reloads from the runtime's DeviceManager,
batches run and padding rows added by the server) are exported under `:tfpopef:`.
"""
import collections
import logging
import threading

from prometheus_client import CollectorRegistry, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import Metric

log = logging.getLogger("popef_model_server")
disable_created_metrics()   # TF Serving exports no *_created samples
DEFAULT_PATH = "/monitoring/prometheus/metrics"
# Microsecond buckets: 10 us .. ~100 s, like TF Serving's exponential latency buckets.
_LATENCY_BUCKETS_US = tuple(10 * 1.8 ** i for i in range(28))
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class _Counters:
    """Thread-safe labelled counters exposed with their exact names."""

    def __init__(self):
        self._lock = threading.Lock()
        self._values = collections.OrderedDict()   # name -> {labels tuple: value}
        self._meta = {}
        self._sources = []

    def add_source(self, amounts) -> None:
        """`amounts()`: (name, labels, amount) counted elsewhere (the native front end's fast
        path), added to these counters whenever they are read."""
        self._sources.append(amounts)

    def _snapshot(self) -> dict:
        with self._lock:
            snapshot = {n: dict(t) for n, t in self._values.items()}
        for source in self._sources:
            for name, labels, amount in source():
                table = snapshot[name]
                table[labels] = table.get(labels, 0.0) + amount
        return snapshot

    def define(self, name, documentation, label_names):
        self._values[name] = {}
        self._meta[name] = (documentation, tuple(label_names))

    def inc(self, name, *labels, amount=1.0):
        with self._lock:
            table = self._values[name]
            table[labels] = table.get(labels, 0.0) + amount

    def inc_all(self, labels: tuple, amounts) -> None:
        """Adds each (name, amount) of `amounts` under the same labels, in one lock."""
        with self._lock:
            for name, amount in amounts:
                table = self._values[name]
                table[labels] = table.get(labels, 0.0) + amount

    def value(self, name, *labels):
        return self._snapshot()[name].get(labels, 0.0)

    def text(self) -> str:
        """Prometheus text format 0.0.4 (written here: prometheus_client would rename the
        counters to *_total in the HELP and TYPE lines)."""
        snapshot = self._snapshot()
        lines = []
        for name, table in snapshot.items():
            documentation, label_names = self._meta[name]
            lines += [f"# HELP {name} {documentation}", f"# TYPE {name} counter"]
            for labels, value in table.items():
                pairs = ",".join(f'{k}="{_escape(v)}"' for k, v in zip(label_names, labels))
                lines.append(f"{name}{{{pairs}}} {value!r}" if pairs else f"{name} {value!r}")
        return "\n".join(lines) + "\n"


def _escape(value) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class _DeviceGauges:
    """The emulator runtime's per-device load/reload counters (DeviceManager().devices()).
    The runtime module is imported once, when the server starts, not at scrape time."""

    def __init__(self, device_manager):
        self._devices = device_manager

    def collect(self):
        devices = self._devices.devices()
        for field, doc in (("load_count", "executables loaded onto the device"),
                           ("reload_count", "executable switches (weights reloaded)")):
            metric = Metric(f":tfpopef:device:{field}", f"Emulated IPU: {doc}.", "gauge")
            for device in devices:
                metric.add_sample(f":tfpopef:device:{field}",
                                  {"device": str(device["id"]),
                                   "ipu_version": device["ipu_version"]},
                                  float(device[field]))
            yield metric


def _device_manager():
    try:
        from tf_popef_op.runtime import DeviceManager
    except ImportError as error:
        log.warning("emulator runtime not importable (%s): no :tfpopef:device metrics", error)
        return None
    return DeviceManager()


class ServerMetrics:
    def __init__(self):
        self.registry = CollectorRegistry(auto_describe=False)
        self.counters = _Counters()
        c = self.counters
        c.define(":tensorflow:serving:request_count", "The total number of requests.",
                 ("model_name", "status"))
        c.define(":tensorflow:serving:model_load_count", "Model version load attempts.",
                 ("model_name", "status"))
        c.define(":tensorflow:serving:model_unload_count", "Model versions unloaded.",
                 ("model_name",))
        c.define(":tensorflow:serving:config_reload_count", "Model set (config) reloads.", ())
        c.define(":tensorflow:serving:batching_session:queue_full_count",
                 "Requests refused because the batch queue was full.", ("model_name",))
        c.define(":tfpopef:server:batches_executed", "Batches run by the server's batcher.",
                 ("model_name",))
        c.define(":tfpopef:server:padding_rows", "Rows added to pad batches to an allowed "
                 "batch size.", ("model_name",))
        devices = _device_manager()
        if devices is not None:
            self.registry.register(_DeviceGauges(devices))
        self.request_latency = Histogram(
            ":tensorflow:serving:request_latency",
            "Distribution of wall time (in microseconds) for Tensorflow Serving request.",
            ("model_name", "API", "entrypoint"), buckets=_LATENCY_BUCKETS_US,
            registry=self.registry)
        self.batch_size = Histogram(
            ":tensorflow:serving:batching_session:processed_batch_size",
            "Tracks the batch size distribution on processing.", ("model_name",),
            buckets=_BATCH_BUCKETS, registry=self.registry)
        self.padding_size = Histogram(
            ":tensorflow:serving:batching_session:padding_size",
            "Tracks the padding size distribution on batches.", ("model_name",),
            buckets=_BATCH_BUCKETS, registry=self.registry)
        self.queuing_latency = Histogram(
            ":tensorflow:serving:batching_session:queuing_latency",
            "Tracks the latency (in microseconds) spent waiting in the batch queue.",
            ("model_name",), buckets=_LATENCY_BUCKETS_US, registry=self.registry)

    # ---- observers called by the core, manager and batcher -------------------------------
    def request_done(self, api, model_name, status, seconds, entrypoint="GRPC"):
        self.counters.inc(":tensorflow:serving:request_count", model_name, status)
        self.request_latency.labels(model_name, api, entrypoint).observe(seconds * 1e6)

    def servable_event(self, kind, model_name, version):
        if kind == "available":
            self.counters.inc(":tensorflow:serving:model_load_count", model_name, "OK")
        elif kind == "load_failed":
            self.counters.inc(":tensorflow:serving:model_load_count", model_name, "ERROR")
        elif kind == "unloaded":
            self.counters.inc(":tensorflow:serving:model_unload_count", model_name)

    def config_reloaded(self):
        self.counters.inc(":tensorflow:serving:config_reload_count")

    def queue_full(self, model_name):
        self.counters.inc(":tensorflow:serving:batching_session:queue_full_count", model_name)

    def batch_done(self, model_name, size, padding, queue_delays_s):
        self.counters.inc(":tfpopef:server:batches_executed", model_name)
        self.counters.inc(":tfpopef:server:padding_rows", model_name, amount=float(padding))
        self.batch_size.labels(model_name).observe(size)
        self.padding_size.labels(model_name).observe(padding)
        for delay in queue_delays_s:
            self.queuing_latency.labels(model_name).observe(delay * 1e6)

    def exposition(self) -> bytes:
        return self.counters.text().encode() + generate_latest(self.registry)


def prometheus_path(monitoring_config_file: str):
    """The metrics path if the monitoring config enables Prometheus, else None."""
    if not monitoring_config_file:
        return None
    from serving.model_server.server_protos import MonitoringConfig, parse_text_file
    config = parse_text_file(monitoring_config_file, MonitoringConfig)
    if not config.prometheus_config.enable:
        return None
    return config.prometheus_config.path or DEFAULT_PATH
