"""Triton's inference metrics (`nv_inference_*`, labels `model` and `version`) next to TF
Serving's on the same Prometheus path. Like Triton, the durations are cumulative counters in
microseconds, and `nv_inference_count` counts rows (inferences), `nv_inference_exec_count`
requests run."""

_COUNTERS = (
    ("nv_inference_request_success", "Number of successful inference requests, all batch sizes"),
    ("nv_inference_request_failure", "Number of failed inference requests, all batch sizes"),
    ("nv_inference_count", "Number of inferences performed (rows; does not include cached "
                           "requests)"),
    ("nv_inference_exec_count", "Number of model executions performed"),
    ("nv_inference_request_duration_us", "Cumulative inference request duration in "
                                         "microseconds (includes cached requests)"),
)


class TritonMetrics:
    """Registers the nv_* counters on a ServerMetrics' exact-name counters."""

    def __init__(self, server_metrics):
        self.server_metrics = server_metrics
        self._counters = server_metrics.counters
        for name, documentation in _COUNTERS:
            self._counters.define(name, documentation, ("model", "version"))

    def request_done(self, model: str, version: str, ok: bool, rows: int,
                     duration_us: float) -> None:
        c = self._counters
        if ok:
            c.inc("nv_inference_request_success", model, version)
            c.inc("nv_inference_count", model, version, amount=float(rows))
            c.inc("nv_inference_exec_count", model, version)
        else:
            c.inc("nv_inference_request_failure", model, version)
        c.inc("nv_inference_request_duration_us", model, version, amount=duration_us)
