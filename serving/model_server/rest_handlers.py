"""REST API on tornado: `/v1/models/{name}[/versions/{n}|/labels/{label}]` status and
metadata, `:predict` / `:classify` / `:regress`. Each handler fills the same request proto the
gRPC API uses, runs ServerCore on a worker thread (the event loop never blocks) and answers
TF Serving's JSON, or `{"error": ...}` with the mapped HTTP status."""
import asyncio
import concurrent.futures
import json
import logging

import grpc
import tornado.web
from tensorflow_serving.apis import (get_model_metadata_pb2, get_model_status_pb2, model_pb2,
                                     predict_pb2)

from serving.model_server import rest_json
from serving.model_server.errors import (ServingError, as_serving_error, http_status,
                                         invalid_argument, truncated)
from serving.model_server.tensor_codec import to_ndarray, to_tensor_proto

log = logging.getLogger("popef_model_server")

_MODEL = r"/v1/models/(?P<name>[^/:]+)(?:/versions/(?P<version>[^/:]+)|/labels/(?P<label>[^/:]+))?"


def _fill_model_spec(spec, name, version, label):
    spec.name = name
    if version is not None:
        try:
            spec.version.value = int(version)
        except ValueError:
            raise invalid_argument(f"Malformed version: {version}") from None
    elif label is not None:
        spec.version_label = label


class _Handler(tornado.web.RequestHandler):
    def initialize(self, core, pool, timeout_s, cors):
        self.core = core
        self.pool = pool
        self.timeout_s = timeout_s
        self.cors = cors
        self.set_default_headers()

    def set_default_headers(self):
        self.set_header("Content-Type", "application/json")
        if getattr(self, "cors", False):   # --rest_api_enable_cors_support, on every answer
            self.set_header("Access-Control-Allow-Origin", "*")

    def options(self, *args, **kwargs):
        """CORS preflight (only with --rest_api_enable_cors_support, else 405)."""
        if not self.cors:
            raise tornado.web.HTTPError(405)
        self.set_header("Access-Control-Allow-Methods", "POST, GET")
        self.set_header("Access-Control-Allow-Headers", "Content-Type")
        self.set_status(200)
        self.finish()

    def answer(self, body: dict, status: int = 200):
        self.set_status(status)
        # allow_nan: TF Serving prints NaN/Infinity for non-finite floats.
        self.finish(json.dumps(body, indent=None, separators=(",", ":")))

    def answer_error(self, error: ServingError):
        self.answer({"error": truncated(error.message)}, http_status(error.code))

    async def run(self, function, admission=None, model: str = ""):
        """Runs `function()` on the worker pool within --rest_api_timeout_in_ms (a timeout
        cancels it if it has not started). With `admission`, the request counts against the
        model's and the server's bounds until answered; past them it answers 429 at once."""
        loop = asyncio.get_running_loop()
        try:
            if admission is not None:
                admission.acquire(model)
        except ServingError as error:
            self.answer_error(error)
            return
        try:
            future = loop.run_in_executor(self.pool, function)
            result = await (asyncio.wait_for(future, self.timeout_s) if self.timeout_s
                            else future)
        except asyncio.TimeoutError:
            self.answer_error(ServingError(grpc.StatusCode.DEADLINE_EXCEEDED,
                                           "Deadline exceeded: the request took longer than "
                                           "--rest_api_timeout_in_ms"))
            return
        except Exception as error:
            self.answer_error(as_serving_error(error))
            return
        finally:
            if admission is not None:
                admission.release(model)
        self.answer(result)

    def write_error(self, status_code, **kwargs):
        self.answer({"error": self._reason}, status_code)


class StatusHandler(_Handler):
    async def get(self, name, version=None, label=None):
        def work():
            request = get_model_status_pb2.GetModelStatusRequest()
            _fill_model_spec(request.model_spec, name, version, label)
            return rest_json.status_body(self.core.get_model_status(request))
        await self.run(work)


class MetadataHandler(_Handler):
    async def get(self, name, version=None, label=None):
        def work():
            request = get_model_metadata_pb2.GetModelMetadataRequest()
            _fill_model_spec(request.model_spec, name, version, label)
            request.metadata_field.append("signature_def")
            return rest_json.metadata_body(self.core.get_model_metadata(request, "REST"))
        await self.run(work)


class InferenceHandler(_Handler):
    async def post(self, name, version=None, label=None, verb=None):
        raw = self.request.body

        def handle():
            body = rest_json.parse_body(raw)
            if verb == "predict":
                return self._predict(body, name, version, label)
            spec = model_pb2.ModelSpec()
            _fill_model_spec(spec, name, version, label)
            return self.core.classify_or_regress_json(verb, body, spec)

        def work():   # counted and timed as a whole, JSON parsing included
            return self.core.observe(verb, name, handle, "REST")
        await self.run(work, self.core.admission, name)

    def _predict(self, body, name, version, label):
        request = predict_pb2.PredictRequest()
        _fill_model_spec(request.model_spec, name, version, label)
        signature = body.get("signature_name", "")
        if not isinstance(signature, str):
            raise invalid_argument("'signature_name' must be a string")
        request.model_spec.signature_name = signature
        dtypes = self.core.signature_input_dtypes(request.model_spec)
        inputs, layout = rest_json.inputs_from_body(body, dtypes)
        for alias, array in inputs.items():
            request.inputs[alias].CopyFrom(to_tensor_proto(array))
        response = self.core.predict(request, observed=False)
        outputs = {alias: to_ndarray(proto) for alias, proto in response.outputs.items()}
        return rest_json.predictions_body(outputs, layout)


class MalformedHandler(_Handler):
    """Anything under /v1/ that no route matches: TF Serving answers INVALID_ARGUMENT."""

    def _malformed(self, *args):
        self.answer_error(invalid_argument(
            f"Malformed request: {self.request.method} {self.request.path}"))

    get = post = put = delete = patch = _malformed


class MetricsHandler(tornado.web.RequestHandler):
    """Prometheus scrape endpoint (`prometheus_config.path`)."""

    def initialize(self, metrics):
        self.metrics = metrics

    def get(self):
        from prometheus_client import CONTENT_TYPE_LATEST
        self.set_header("Content-Type", CONTENT_TYPE_LATEST)
        self.finish(self.metrics.exposition())


def make_app(core, pool: concurrent.futures.Executor, timeout_ms: int, metrics=None,
             metrics_path=None, cors: bool = False):
    settings = dict(core=core, pool=pool, timeout_s=timeout_ms / 1000.0 if timeout_ms else 0,
                    cors=cors)
    extra_routes = []
    if metrics is not None and metrics_path:
        extra_routes.append((metrics_path, MetricsHandler, dict(metrics=metrics)))
    routes = [
        (_MODEL + r"/metadata", MetadataHandler, settings),
        (_MODEL + r":(?P<verb>predict|classify|regress)", InferenceHandler, settings),
        (_MODEL, StatusHandler, settings),
        *extra_routes,
        (r"/v1/.*", MalformedHandler, settings),
    ]
    return tornado.web.Application(routes)
