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
# The stages of a request the runtime times: Triton's statistics names, each the prefix of a
# Future.timing() field (`<stage>_ns`) and of a counter (`nv_inference_<stage>_duration_us`).
TIMED_STAGES = (
    ("queue", "Cumulative time requests waited in the runtime's queue until their batch "
              "started, in microseconds"),
    ("compute_input", "Cumulative time gathering requests' input rows into their batches, in "
                      "microseconds"),
    ("compute_infer", "Cumulative time running the model on requests' batches, in "
                      "microseconds"),
    ("compute_output", "Cumulative time scattering batch outputs back to requests, in "
                       "microseconds"),
)


class TritonMetrics:
    """Registers the nv_* counters on a ServerMetrics' exact-name counters."""

    def __init__(self, server_metrics):
        self.server_metrics = server_metrics
        self._counters = server_metrics.counters
        for name, documentation in _COUNTERS:
            self._counters.define(name, documentation, ("model", "version"))
        for stage, documentation in TIMED_STAGES:
            self._counters.define(f"nv_inference_{stage}_duration_us", documentation,
                                  ("model", "version"))

    def request_done(self, model: str, version: str, ok: bool, rows: int,
                     duration_us: float, timing=None) -> None:
        """`timing`: the runtime's Future.timing() of a request it ran, else None."""
        c = self._counters
        if ok:
            c.inc("nv_inference_request_success", model, version)
            c.inc("nv_inference_count", model, version, amount=float(rows))
            c.inc("nv_inference_exec_count", model, version)
            if timing is not None:
                for stage, _ in TIMED_STAGES:
                    c.inc(f"nv_inference_{stage}_duration_us", model, version,
                          amount=timing[f"{stage}_ns"] / 1e3)
        else:
            c.inc("nv_inference_request_failure", model, version)
        c.inc("nv_inference_request_duration_us", model, version, amount=duration_us)
