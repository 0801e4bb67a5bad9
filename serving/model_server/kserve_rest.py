"""KServe v2 REST (Triton's HTTP API) on the REST port, next to TF Serving's `/v1` routes:

    GET  /v2                                   server metadata
    GET  /v2/health/live | /v2/health/ready
    GET  /v2/models/{m}[/versions/{v}]         model metadata
    GET  /v2/models/{m}[/versions/{v}]/ready | /config | /stats
    POST /v2/models/{m}[/versions/{v}]/infer   JSON tensors and the binary tensor data extension
    POST /v2/repository/index, /v2/repository/models/{m}/load | /unload

A model name may hold a `/` (`fused/adder`, see kserve_service.py): the path is split on raw
`/` before percent-decoding, so `fused%2Fadder` (what tritonclient sends) and `fused/adder`
both work. Errors answer `{"error": "..."}` with 400 (bad request), 404 (unknown model or
version), 429 (queue full) or 503 (unavailable).

Binary tensor data extension: with an `Inference-Header-Content-Length: N` header the first N
body bytes are the JSON header and the rest the raw tensors, in input order, for every input
with a `binary_data_size` parameter; outputs asked with `binary_data: true` (or every output,
with the request parameter `binary_data_output: true`) come back the same way.
"""
import asyncio
import json
from urllib.parse import unquote

import grpc

from serving.model_server import kserve_codec
from serving.model_server.errors import (ServingError, as_serving_error, invalid_argument,
                                         not_found)
from serving.model_server.request_limits import check_json_depth
from serving.model_server.rest_handlers import _Handler

HEADER_LENGTH = "Inference-Header-Content-Length"
_VERBS = ("ready", "infer", "config", "stats")


def parse_model_path(raw_path: str, prefix: str):
    """(name, version, verb) of `/v2/models/<name>[/versions/<v>][/<verb>]`."""
    segments = [unquote(s) for s in raw_path[len(prefix):].split("/")]
    verb = segments.pop() if len(segments) > 1 and segments[-1] in _VERBS else ""
    version = ""
    if len(segments) > 2 and segments[-2] == "versions":
        version = segments.pop()
        segments.pop()
    name = "/".join(segments)
    if not name or any(not s for s in segments):
        raise not_found(f"malformed model path: {raw_path}")
    return name, version, verb


class _V2Handler(_Handler):
    def initialize(self, core, pool, timeout_s, cors, kserve):
        super().initialize(core, pool, timeout_s, cors)
        self.kserve = kserve

    def empty(self, status: int):
        self.set_status(status)
        self.finish()

    async def _in_pool(self, function):
        """function() on the worker pool, within --rest_api_timeout_in_ms."""
        future = asyncio.get_running_loop().run_in_executor(self.pool, function)
        if not self.timeout_s:
            return await future
        try:
            return await asyncio.wait_for(future, self.timeout_s)
        except asyncio.TimeoutError:
            raise ServingError(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline exceeded: the "
                               "request took longer than --rest_api_timeout_in_ms") from None


class ServerHandler(_V2Handler):
    async def get(self, what=None):
        if what is None:
            await self.run(self.kserve.server_metadata)
        elif what == "live":
            self.empty(200)
        else:
            self.empty(200 if self.kserve.ready() else 503)


class ModelHandler(_V2Handler):
    async def get(self):
        try:
            name, version, verb = parse_model_path(self.request.path, "/v2/models/")
        except ServingError as error:
            return self.answer_error(error)
        if verb == "ready":
            return self.empty(200 if self.kserve.model_ready(name, version) else 400)
        if verb == "config":
            return await self.run(lambda: model_config(self.kserve, name, version))
        if verb == "stats":
            return await self.run(lambda: {"model_stats": self.kserve.model_statistics(
                name, version)})
        if verb:
            return self.answer_error(invalid_argument(f"unsupported: GET {self.request.path}"))
        await self.run(lambda: self.kserve.model_metadata(name, version))

    async def post(self):
        try:
            name, version, verb = parse_model_path(self.request.path, "/v2/models/")
        except ServingError as error:
            return self.answer_error(error)
        if verb != "infer":
            return self.answer_error(invalid_argument(f"unsupported: POST {self.request.path}"))
        header_length = self.request.headers.get(HEADER_LENGTH)
        body = self.request.body

        def work():
            return infer(self.kserve, name, version, body, header_length)
        try:
            with self.core.admission.admitted(name):
                header, chunks = await self._in_pool(work)
        except Exception as error:   # every failure answers {"error": ...}
            return self.answer_error(as_serving_error(error))
        if chunks:
            self.set_header("Content-Type", "application/octet-stream")
            self.set_header(HEADER_LENGTH, str(len(header)))
            self.write(header)
            for chunk in chunks:
                self.write(chunk)
            self.finish()
        else:
            self.finish(header)


class AllStatsHandler(_V2Handler):
    async def get(self):
        await self.run(lambda: {"model_stats": self.kserve.model_statistics()})


class RepositoryHandler(_V2Handler):
    async def post(self, name=None, action=None):
        body = self.request.body

        def work():
            if name is None:
                request = _json(body) if body else {}
                return self.kserve.repository_index(bool(request.get("ready", False)))
            model = unquote(name)
            if action == "load":
                self.kserve.load(model)
            else:
                self.kserve.unload(model)
            return None
        try:
            result = await self._in_pool(work)
        except Exception as error:   # every failure answers {"error": ...}
            return self.answer_error(as_serving_error(error))
        if result is None:
            return self.empty(200)
        self.answer(result)


def _json(raw) -> dict:
    check_json_depth(raw)
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as error:
        raise invalid_argument(f"failed to parse the request JSON: {error}") from None
    if not isinstance(value, dict):
        raise invalid_argument("the request JSON must be an object")
    return value


def _parameters(holder: dict, where: str) -> dict:
    parameters = holder.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise invalid_argument(f"{where}: 'parameters' must be an object")
    return parameters


def _binary(parameters, default: bool) -> bool:
    value = parameters.get("binary_data", default)
    if not isinstance(value, bool):
        raise invalid_argument("parameter 'binary_data' must be a boolean")
    return value


def decode_request(body: bytes, header_length):
    """(request JSON, {input name: array}) of an infer request body."""
    view = memoryview(body)
    if header_length is not None:
        try:
            length = int(header_length)
        except ValueError:
            raise invalid_argument(f"{HEADER_LENGTH} must be an integer, got "
                                   f"'{header_length}'") from None
        if not 0 <= length <= len(body):
            raise invalid_argument(f"{HEADER_LENGTH} {length} is outside the body's "
                                   f"{len(body)} bytes")
        request, binary = _json(bytes(view[:length])), view[length:]
    else:
        request, binary = _json(body), view[len(body):]
    tensors = request.get("inputs")
    if not isinstance(tensors, list) or not tensors:
        raise invalid_argument("the request has no 'inputs' (a list of tensors)")
    inputs, offset = {}, 0
    for tensor in tensors:
        if not isinstance(tensor, dict) or not isinstance(tensor.get("name"), str):
            raise invalid_argument("every input needs a 'name'")
        name = tensor["name"]
        if name in inputs:
            raise invalid_argument(f"input '{name}' is given twice")
        for field in ("datatype", "shape"):
            if field not in tensor:
                raise invalid_argument(f"input '{name}' has no '{field}'")
        size = _parameters(tensor, f"input '{name}'").get("binary_data_size")
        if size is not None:
            if not isinstance(size, int) or size < 0 or offset + size > len(binary):
                raise invalid_argument(f"input '{name}': binary_data_size {size!r} does not fit "
                                       f"the {len(binary) - offset} binary bytes left")
            inputs[name] = kserve_codec.from_raw(binary[offset:offset + size],
                                                 tensor["datatype"], tensor["shape"], name)
            offset += size
        elif "data" in tensor:
            inputs[name] = kserve_codec.from_json(tensor["data"], tensor["datatype"],
                                                  tensor["shape"], name)
        else:
            raise invalid_argument(f"input '{name}' has neither 'data' nor a binary_data_size "
                                   "parameter")
    if offset != len(binary):
        raise invalid_argument(f"{len(binary) - offset} bytes of binary data are not claimed by "
                               "any input's binary_data_size")
    return request, inputs


def infer(kserve, name: str, version: str, body: bytes, header_length):
    """(response header bytes, [binary chunks]) of one infer request."""
    kserve.resolve(name, version)   # an unknown model answers 404 whatever the body
    request, inputs = decode_request(body, header_length)
    parameters = _parameters(request, "the request")
    binary_default = parameters.get("binary_data_output", False)
    if not isinstance(binary_default, bool):
        raise invalid_argument("parameter 'binary_data_output' must be a boolean")
    wanted = request.get("outputs")
    binary = {}
    if wanted is not None:
        if not isinstance(wanted, list) or not all(
                isinstance(o, dict) and isinstance(o.get("name"), str) for o in wanted):
            raise invalid_argument("'outputs' must be a list of objects with a 'name'")
        binary = {o["name"]: _binary(_parameters(o, f"output '{o['name']}'"), binary_default)
                  for o in wanted}
    target, outputs = kserve.infer(name, version, inputs, list(binary) if wanted else None,
                                   entrypoint="REST")
    response = {"model_name": name, "model_version": str(target.servable.version)}
    if isinstance(request.get("id"), str) and request["id"]:
        response["id"] = request["id"]
    tensors, chunks = [], []
    for output_name, array in outputs.items():
        tensor = {"name": output_name, "datatype": kserve_codec.datatype_of(array.dtype),
                  "shape": list(array.shape)}
        if binary.get(output_name, binary_default):
            raw = kserve_codec.to_raw(array)
            tensor["parameters"] = {"binary_data_size": len(raw)}
            chunks.append(raw)
        else:
            tensor["data"] = kserve_codec.to_json(array)
        tensors.append(tensor)
    response["outputs"] = tensors
    return json.dumps(response, separators=(",", ":")).encode(), chunks


_CONFIG_TYPE = {"BYTES": "STRING"}


def model_config(kserve, name: str, version: str) -> dict:
    """Triton's model configuration JSON for a v2 model (what the server serves it with).
    With a max_batch_size (a PopEF's config.pbtxt) dims leave out the batch dimension, as in
    Triton; otherwise they are the full shapes, -1 where any size is accepted."""
    target = kserve.resolve(name, version)
    options = getattr(target.servable, "options", None)
    max_batch = options.max_batch_size if options is not None else 0
    strip = max_batch > 0 and target.entry.batch_axis == 0

    def tensors(specs):
        rows = []
        for s in specs:
            dims = list(s.shape) if s.shape is not None else [-1]
            datatype = kserve_codec.datatype_of(s.dtype)
            rows.append({"name": s.name, "data_type": "TYPE_" + _CONFIG_TYPE.get(datatype,
                                                                                 datatype),
                         "dims": dims[1:] if strip else dims})
        return rows
    config = {"name": name, "platform": getattr(target.servable, "platform",
                                                "tensorflow_savedmodel"),
              "max_batch_size": max_batch if strip else 0,
              "input": tensors(target.entry.inputs), "output": tensors(target.entry.outputs)}
    runner = getattr(target.servable, "runner", None)
    if runner is not None:   # the emulated IPU the PopEF runs on
        config["instance_group"] = [{"kind": "KIND_MODEL", "count": 1,
                                     "gpus": [runner.device_id]}]
    return config


def routes(kserve, core, pool, timeout_s, cors):
    settings = dict(core=core, pool=pool, timeout_s=timeout_s, cors=cors,
                    kserve=kserve)
    return [
        (r"/v2/?", ServerHandler, settings),
        (r"/v2/health/(?P<what>live|ready)", ServerHandler, settings),
        (r"/v2/models/stats", AllStatsHandler, settings),
        (r"/v2/models/.+", ModelHandler, settings),
        (r"/v2/repository/index", RepositoryHandler, settings),
        (r"/v2/repository/models/(?P<name>[^/]+)/(?P<action>load|unload)", RepositoryHandler,
         settings),
    ]
