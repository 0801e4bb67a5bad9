"""Triton's inference metrics (`nv_inference_*`, labels `model` and `version`) next to TF
Serving's on the same Prometheus path. Like Triton, the durations are cumulative counters in
microseconds, and `nv_inference_count` counts rows (inferences), `nv_inference_exec_count`
requests run.

The queue and compute durations come from the runtime's timing of each request (bare-PopEF
models) and count successful requests only, as Triton's do; a model whose requests the runtime
does not time (a SavedModel, run through TensorFlow) has no such series rather than zeros.
"""

_COUNTERS = (
    ("nv_inference_request_success", "Number of successful inference requests, all batch sizes"),
    ("nv_inference_request_failure", "Number of failed inference requests, all batch sizes"),
    ("nv_inference_count", "Number of inferences performed (rows; does not include cached "
                           "requests)"),
    ("nv_inference_exec_count", "Number of model executions performed"),
    ("nv_inference_request_duration_us", "Cumulative inference request duration in "
                                         "microseconds (includes cached requests)"),
)
# The stages of a request the runtime times, by Triton's statistics names: each names a
# Future.timing() field (`<stage>_ns`) and a counter (`nv_inference_<stage>_duration_us`).
_STAGE_DOCUMENTATION = {
    "queue": "Cumulative time requests waited in the runtime's queue until their batch started, "
             "in microseconds",
    "compute_input": "Cumulative time gathering requests' input rows into their batches, in "
                     "microseconds",
    "compute_infer": "Cumulative time running the model on requests' batches, in microseconds",
    "compute_output": "Cumulative time scattering batch outputs back to requests, in "
                      "microseconds",
}
TIMED_STAGES = tuple(_STAGE_DOCUMENTATION)
_TIMED_COUNTERS = tuple((f"nv_inference_{stage}_duration_us", f"{stage}_ns")
                        for stage in TIMED_STAGES)


class TritonMetrics:
    """Registers the nv_* counters on a ServerMetrics' exact-name counters."""

    def __init__(self, server_metrics):
        self.server_metrics = server_metrics
        self._counters = server_metrics.counters
        for name, documentation in _COUNTERS:
            self._counters.define(name, documentation, ("model", "version"))
        for stage, documentation in _STAGE_DOCUMENTATION.items():
            self._counters.define(f"nv_inference_{stage}_duration_us", documentation,
                                  ("model", "version"))

    def request_done(self, model: str, version: str, ok: bool, rows: int,
                     duration_us: float, timing=None) -> None:
        """`timing`: the runtime's Future.timing() of a request it ran, else None."""
        if ok:
            amounts = [("nv_inference_request_success", 1.0),
                       ("nv_inference_count", float(rows)), ("nv_inference_exec_count", 1.0),
                       ("nv_inference_request_duration_us", duration_us)]
            if timing is not None:
                amounts += [(name, timing[field] / 1e3) for name, field in _TIMED_COUNTERS]
        else:
            amounts = [("nv_inference_request_failure", 1.0),
                       ("nv_inference_request_duration_us", duration_us)]
        self._counters.inc_all((model, version), amounts)
