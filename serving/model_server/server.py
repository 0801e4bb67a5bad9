"""Wiring: flags -> custom ops -> ServerCore (models loaded) -> gRPC and REST servers ->
wait for SIGTERM/SIGINT -> drain and exit 0.

Shutdown order: mark health NOT_SERVING, stop accepting (gRPC `stop(grace)` refuses new RPCs
and waits for running ones; the REST listener closes and in-flight REST requests finish),
then unload models.
"""
import asyncio
import concurrent.futures
import json
import logging
import os
import signal
import sys
import threading

import grpc

from serving.model_server.flags import default_thread_count, parse_channel_arguments, parse_flags

log = logging.getLogger("popef_model_server")

DRAIN_GRACE_S = 30.0


class RestServer:
    """tornado on its own thread and event loop; blocking work goes to a thread pool."""

    def __init__(self, app, pool, address: str, port: int, in_flight):
        self._app = app
        self._in_flight = in_flight
        self._address = address
        self._requested_port = port
        self.pool = pool
        self.port = None
        self._loop = None
        self._server = None
        self._ready = threading.Event()
        self._error = None
        self._thread = threading.Thread(target=self._run, name="rest-api", daemon=True)

    def start(self) -> int:
        self._thread.start()
        self._ready.wait(30)
        if self._error:
            raise self._error
        return self.port

    def _run(self):
        import tornado.httpserver
        import tornado.netutil
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
        try:
            sockets = tornado.netutil.bind_sockets(self._requested_port, self._address)
            self._server = tornado.httpserver.HTTPServer(self._app)
            self._server.add_sockets(sockets)
            self.port = sockets[0].getsockname()[1]
        except Exception as error:  # reported to start()
            self._error = error
            self._ready.set()
            return
        self._ready.set()
        self._loop.run_forever()

    def stop(self, grace_s: float) -> None:
        """Stops listening, lets in-flight requests finish (up to grace_s), then exits."""
        if self._loop is None or self._server is None:
            return

        async def drain():
            self._server.stop()                       # no new connections
            deadline = self._loop.time() + grace_s
            while self._in_flight.count and self._loop.time() < deadline:
                await asyncio.sleep(0.02)             # requests being handled finish
            await asyncio.wait_for(self._server.close_all_connections(), 5)

        future = asyncio.run_coroutine_threadsafe(drain(), self._loop)
        try:
            future.result(grace_s + 5)
        except Exception:  # idle keep-alive connections that outlive the grace are dropped
            log.warning("REST connections still open after %.0f s; closing", grace_s)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self.pool.shutdown(wait=True)


def _build_load_servable(options, metrics, scheduler):
    from serving.model_server.batching import BatchingServable
    from serving.model_server.popef_version import is_bare_popef, load_bare_popef
    from serving.model_server.servable import Servable
    from serving.model_server.warmup import warm_up

    def load_servable(name, version, path):
        if is_bare_popef(path):   # run by the runtime directly: no TensorFlow, no batcher
            return load_bare_popef(name, version, path)
        servable = Servable(name, version, path, options.saved_model_tags.split(","))
        servable.load()
        if scheduler is not None:
            servable = BatchingServable(servable, scheduler)
        if options.enable_model_warmup:
            warm_up(servable, path, options.num_request_iterations_for_warmup)
        return servable
    return load_servable


def _configure_tensorflow_threads(options) -> None:
    import tensorflow as tf
    if options.tensorflow_intra_op_parallelism:
        tf.config.threading.set_intra_op_parallelism_threads(
            options.tensorflow_intra_op_parallelism)
    if options.tensorflow_inter_op_parallelism:
        tf.config.threading.set_inter_op_parallelism_threads(
            options.tensorflow_inter_op_parallelism)


def _ssl_credentials(path: str):
    from google.protobuf import text_format
    from serving.model_server.server_protos import SSLConfig
    config = SSLConfig()
    with open(path, encoding="utf-8") as handle:
        text_format.Parse(handle.read(), config)
    pairs = [(config.server_key.encode(), config.server_cert.encode())]
    root = config.custom_ca.encode() if config.custom_ca else None
    return grpc.ssl_server_credentials(pairs, root_certificates=root,
                                       require_client_auth=config.client_verify)


def run(options) -> int:
    from serving.model_server.core import ServerCore
    from serving.model_server.custom_ops import load_custom_ops
    from serving.model_server.grpc_handlers import add_services
    from serving.model_server.rest_handlers import InFlight, make_app
    from serving.model_server.batching import BatchScheduler, load_batching_options
    from serving.model_server.metrics import ServerMetrics, prometheus_path
    from serving.model_server.kserve_grpc import add_inference_service
    from serving.model_server.kserve_rest import routes as kserve_routes
    from serving.model_server.kserve_service import KServeV2

    metrics = ServerMetrics()
    scheduler = None
    try:
        _configure_tensorflow_threads(options)
        load_custom_ops(options.custom_op_paths)
        metrics_path = prometheus_path(options.monitoring_config_file)
        if options.enable_batching:
            scheduler = BatchScheduler(load_batching_options(options.batching_parameters_file),
                                       observer=metrics)
        core = ServerCore(options, _build_load_servable(options, metrics, scheduler), metrics)
        core.start()
    except Exception as error:
        message = getattr(error, "message", str(error))
        print(f"Failed to start server. Error: {message}", file=sys.stderr, flush=True)
        return 1
    failed = [(name, row) for name in core.manager.model_names()
              for row in _safe_status(core, name) if row[2] is not None]
    if failed:
        name, (version, _, error) = failed[0]
        print(f"Failed to start server. Error: loading servable {{name: {name} version: "
              f"{version}}} failed: {error.message}", file=sys.stderr, flush=True)
        return 1

    threads = options.grpc_max_threads or default_thread_count()
    channel_options = parse_channel_arguments(options.grpc_channel_arguments)
    grpc_server = grpc.server(concurrent.futures.ThreadPoolExecutor(
        threads, thread_name_prefix="grpc"), options=channel_options)
    add_services(grpc_server, core)
    kserve = KServeV2(core, metrics)          # KServe v2 / Triton protocol, both ports
    add_inference_service(grpc_server, kserve)
    health = None
    if options.enable_grpc_healthcheck_service:
        from grpc_health.v1 import health as grpc_health, health_pb2, health_pb2_grpc
        health = grpc_health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health, grpc_server)
        for service in ("", "tensorflow.serving.PredictionService",
                        "tensorflow.serving.ModelService", "inference.GRPCInferenceService"):
            health.set(service, health_pb2.HealthCheckResponse.SERVING)
    address = f"{options.bind_address}:{options.port}"
    if options.ssl_config_file:
        grpc_port = grpc_server.add_secure_port(address, _ssl_credentials(options.ssl_config_file))
    else:
        grpc_port = grpc_server.add_insecure_port(address)
    if not grpc_port:
        print(f"Failed to start server. Error: cannot bind gRPC port {address}", file=sys.stderr,
              flush=True)
        return 1
    grpc_server.start()
    print(f"Running gRPC ModelServer at {options.bind_address}:{grpc_port} ...", flush=True)

    rest = None
    rest_port = 0
    if options.rest_api_port:
        threads = options.rest_api_num_threads or default_thread_count()
        pool = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="rest")
        in_flight = InFlight()
        app = make_app(core, pool, options.rest_api_timeout_in_ms, metrics, metrics_path,
                       in_flight)
        app.add_handlers(r".*", kserve_routes(kserve, core, pool, (
            options.rest_api_timeout_in_ms or 0) / 1000.0, in_flight))
        rest = RestServer(app, pool, options.bind_address, options.rest_api_port, in_flight)
        rest_port = rest.start()
        print(f"Exporting HTTP/REST API at:{options.bind_address}:{rest_port} ...", flush=True)
    if options.port_file:
        with open(options.port_file + ".tmp", "w", encoding="utf-8") as handle:
            json.dump({"grpc_port": grpc_port, "rest_api_port": rest_port}, handle)
        os.replace(options.port_file + ".tmp", options.port_file)

    stop = threading.Event()
    received = []

    def on_signal(signum, frame):
        received.append(signum)
        stop.set()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while not stop.wait(0.5):
        pass
    log.info("Received %s: draining in-flight requests", signal.Signals(received[0]).name)
    if health is not None:
        health.enter_graceful_shutdown()
    core.stop()
    grpc_done = grpc_server.stop(DRAIN_GRACE_S)
    if rest is not None:
        rest.stop(DRAIN_GRACE_S)
    grpc_done.wait(DRAIN_GRACE_S)
    if scheduler is not None:
        scheduler.stop()
    core.manager.unload_all()
    print("Server stopped cleanly", flush=True)
    return 0


def _safe_status(core, name):
    try:
        return core.manager.status(name)
    except Exception:
        return []


def main(argv=None) -> int:
    logging.basicConfig(level=os.environ.get("POPEF_SERVER_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # One line per HTTP request is too much at serving rates; errors are still logged.
    logging.getLogger("tornado.access").setLevel(logging.WARNING)
    options = parse_flags(sys.argv[1:] if argv is None else argv)
    return run(options)
