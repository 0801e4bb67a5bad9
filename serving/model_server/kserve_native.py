"""The native KServe v2 gRPC listener (`--grpc_inference_port`): the C++ gRPC server of
serving/kserve_native, next to the Python one on `--port`.

ModelInfer on a bare-PopEF version runs in C++ without the GIL: the request's raw tensors go
straight to the version's ModelRunner, shared with the Python servable. Everything else (other
RPCs, SavedModel versions, and any request the fast path does not fully accept, errors
included) is handed to the Python servicer (kserve_grpc.InferenceService) as serialized bytes,
so every answer but the fast path's is the Python server's own.

What the fast path serves is a table published from the ServableManager's state whenever a
version starts loading, becomes available or unloads: the same names `KServeV2.resolve`
answers (`<model>`, `<model>/<subgraph>`, the latest version for an empty version), only for
available bare-PopEF versions. The fast path counts its requests in C++; ModelStatistics and
/metrics add those counts to the Python path's when they are read.
"""
import threading
import time

import grpc

from serving.model_server.errors import (MAX_MESSAGE_CHARS, ServingError, as_serving_error,
                                         truncated)
from serving.model_server.kserve_metrics import TIMED_STAGES

_CODE_NAMES = {code.value[0]: code.name for code in grpc.StatusCode}
FAST_PATH_COUNTER = ":tfpopef:server:native_fast_path_requests"


class _Aborted(Exception):
    def __init__(self, code, details):
        super().__init__(details)
        self.code = code
        self.details = details


class _DelegatedContext:
    """The part of grpc.ServicerContext the servicer uses, for a call the C++ server holds."""

    def __init__(self, timeout_s):
        self._deadline = None if timeout_s is None else time.monotonic() + timeout_s

    def time_remaining(self):
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    def is_active(self) -> bool:
        return self._deadline is None or self._deadline > time.monotonic()

    def abort(self, code, details):
        raise _Aborted(code, details)


class NativeInferenceListener:
    def __init__(self, kserve, max_decoded_tensor_bytes: int):
        from serving import kserve_native
        from serving.model_server.kserve_grpc import InferenceService
        from serving.protos.triton import grpc_service_pb2 as pb
        self._kserve = kserve
        servicer = InferenceService(kserve)
        service = pb.DESCRIPTOR.services_by_name["GRPCInferenceService"]
        self._methods = {m.name: (getattr(pb, m.input_type.name), getattr(servicer, m.name))
                         for m in service.methods
                         if not (m.client_streaming or m.server_streaming)}
        self._max_tensor_bytes = max_decoded_tensor_bytes
        self._front_end = kserve_native.load().FrontEnd(self._delegate, MAX_MESSAGE_CHARS)
        self._publish_lock = threading.Lock()
        kserve.core.manager.add_observer(lambda kind, name, version: self.publish())
        kserve.statistics.add_source(self.statistics_rows)
        if kserve.metrics is not None:
            kserve.metrics.counters.define(FAST_PATH_COUNTER, "KServe v2 ModelInfer requests "
                                           "answered in C++ by the native listener's fast path",
                                           ("model_name",))
            kserve.metrics.counters.add_source(self.metric_amounts)
        self.publish()

    # ---- serving -------------------------------------------------------------------------
    def start(self, address: str, max_concurrent_rpcs: int, channel_arguments,
              ssl_config=None) -> int:
        """The bound port; OSError naming the address if it cannot be bound. Past
        `max_concurrent_rpcs` RPCs held at once (0: no bound) gRPC answers RESOURCE_EXHAUSTED.
        `ssl_config`: a tensorflow.serving.SSLConfig (the --ssl_config_file) or None."""
        tls = None
        if ssl_config is not None:
            tls = (ssl_config.server_key, ssl_config.server_cert, ssl_config.custom_ca,
                   ssl_config.client_verify)
        try:
            return self._front_end.start(address, max_concurrent_rpcs, list(channel_arguments),
                                         tls)
        except RuntimeError as error:
            raise OSError(str(error)) from None

    def stop(self, grace_s: float) -> None:
        self._front_end.stop(grace_s)

    def _delegate(self, method: str, request: bytes, timeout_s):
        """(status code, message, response bytes) of one RPC answered by the Python servicer."""
        request_class, handler = self._methods[method]
        try:
            response = handler(request_class.FromString(request), _DelegatedContext(timeout_s))
        except _Aborted as aborted:
            return aborted.code.value[0], aborted.details, b""
        except Exception as error:   # every failure answers a status, never a crash
            failure = as_serving_error(error)
            return failure.code.value[0], truncated(failure.message), b""
        return 0, "", response.SerializeToString()

    # ---- what the fast path serves -------------------------------------------------------
    def publish(self) -> None:
        with self._publish_lock:   # the newest state is published last
            self._front_end.publish(self._table())

    def _table(self) -> dict:
        """{v2 name: (default version or "", {version: entry})} of the available bare-PopEF
        versions, named as KServeV2.resolve names them."""
        from tensorflow_serving.apis import model_pb2
        from serving.model_server.kserve_service import state_name
        manager = self._kserve.core.manager
        known = set(manager.model_names())
        table = {}
        for model in known:
            try:
                versions = sorted(v for v, state, _ in manager.status(model)
                                  if state_name(state) == "READY")
            except ServingError:   # a model without versions yet
                continue
            for version in versions:
                spec = model_pb2.ModelSpec(name=model)
                spec.version.value = version
                try:
                    servable = manager.resolve(spec)
                except ServingError:   # unloaded meanwhile: the next publication has it
                    continue
                if not hasattr(servable, "subgraphs") or servable.unloaded:
                    continue
                names = {model: servable.default}
                names.update({f"{model}/{s}": s for s in servable.subgraphs
                              if f"{model}/{s}" not in known})
                for name, subgraph in names.items():
                    _, entries = table.setdefault(name, ("", {}))
                    entries[str(version)] = self._entry(model, servable, subgraph)
                    if version == versions[-1]:
                        table[name] = (str(version), entries)
        return table

    def _entry(self, model, servable, key) -> dict:
        subgraph = servable.subgraphs[key]

        def specs(tensors):
            return [(s.name, s.anchor, s.dtype.name, list(s.shape)) for s in tensors]
        return dict(model=model, runner=servable.runner, inputs=specs(subgraph.inputs),
                    outputs=specs(subgraph.outputs),
                    feeds=[(anchor, value.dtype.name, list(value.shape), value.tobytes())
                           for anchor, value in subgraph.feeds.items()],
                    batch_axis=subgraph.batch_axis, batch_size=subgraph.batch_size,
                    pack_requests=servable.options.pack_requests,
                    max_batch_size=servable.options.max_batch_size,
                    max_tensor_bytes=self._max_tensor_bytes)

    # ---- the fast path's counts ----------------------------------------------------------
    def statistics_rows(self) -> dict:
        """{(v2 name, version): row} in kserve_service._Statistics' form."""
        rows = {}
        for c in self._front_end.counts():
            durations = {"success": [c["success"], c["success_ns"]],
                         "fail": [c["fail"], c["fail_ns"]]}
            if c["success"]:
                durations.update({stage: [c["success"], c[f"{stage}_ns"]]
                                  for stage in TIMED_STAGES})
            rows[(c["name"], c["version"])] = dict(
                inference_count=c["rows"], execution_count=c["success"],
                last_inference=c["last_inference_ms"], durations=durations)
        return rows

    def metric_amounts(self):
        """(counter name, labels, amount) of the fast path's requests: Triton's nv_* series,
        TF Serving's request count, and how many the fast path answered."""
        for c in self._front_end.counts():
            labels = (c["name"], c["version"])
            yield FAST_PATH_COUNTER, (c["model"],), float(c["success"] + c["fail"])
            yield "nv_inference_request_success", labels, float(c["success"])
            yield "nv_inference_request_failure", labels, float(c["fail"])
            yield "nv_inference_count", labels, float(c["rows"])
            yield "nv_inference_exec_count", labels, float(c["success"])
            yield ("nv_inference_request_duration_us", labels,
                   (c["success_ns"] + c["fail_ns"]) / 1e3)
            if c["success"]:
                for stage in TIMED_STAGES:
                    yield f"nv_inference_{stage}_duration_us", labels, c[f"{stage}_ns"] / 1e3
                yield ":tensorflow:serving:request_count", (c["model"], "OK"), float(c["success"])
            for code, count in c["fail_by_code"].items():
                yield (":tensorflow:serving:request_count", (c["model"], _CODE_NAMES[code]),
                       float(count))
