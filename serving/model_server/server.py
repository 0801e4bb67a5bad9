"""Wiring: flags and config files -> custom ops -> ServerCore (models loaded) -> gRPC (TCP
and optionally a UNIX socket) and REST servers -> wait for SIGTERM/SIGINT -> drain and exit 0.

Shutdown order: health turns NOT_SERVING (watchers are told), open Watch streams end, the
listeners close (gRPC `stop(grace)` refuses new RPCs and waits for running ones; the REST
listener closes once every accepted connection's request has been answered), then the batch
threads stop and models unload.
"""
import asyncio
import concurrent.futures
import dataclasses
import json
import logging
import os
import signal
import sys
import threading
import time

import grpc

from serving.model_server.flags import default_thread_count, parse_channel_arguments, parse_flags

log = logging.getLogger("popef_model_server")

DRAIN_GRACE_S = 25.0   # within Kubernetes' default 30 s termination grace period
INT32_MAX = 2 ** 31 - 1


class RestServer:
    """tornado on its own thread and event loop; blocking work goes to a thread pool."""

    def __init__(self, app, pool, address: str, port: int, max_body_bytes: int):
        self._app = app
        self._max_body_bytes = max_body_bytes
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
        import tornado.netutil
        from serving.model_server.draining_http_server import DrainingHTTPServer
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
        try:
            sockets = tornado.netutil.bind_sockets(self._requested_port, self._address)
            self._server = DrainingHTTPServer(self._app, max_body_size=self._max_body_bytes)
            self._server.add_sockets(sockets)
            self.port = sockets[0].getsockname()[1]
        except Exception as error:  # reported to start()
            self._error = error
            self._ready.set()
            return
        self._ready.set()
        self._loop.run_forever()

    def stop(self, grace_s: float) -> None:
        """Closes the listener once every request already on the wire has been answered
        (up to grace_s), then the connections, then the loop."""
        if self._loop is None or self._server is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._server.drain(grace_s), self._loop)
        try:
            future.result(grace_s + 10)
        except Exception:  # requests that outlive the grace are cut
            log.warning("REST requests still running after %.0f s; closing", grace_s)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self.pool.shutdown(wait=True)


def _build_load_servable(options, scheduler, stopping: threading.Event):
    """load_servable(name, version, path) with TF Serving's retries: a failed load is tried
    again up to --max_num_load_retries times, --load_retry_interval_micros apart, when its
    error can be transient (a file system or resource hiccup); an invalid model fails at once."""
    from serving.model_server.batching import BatchingServable, load_batching_options
    from serving.model_server.errors import as_serving_error
    from serving.model_server.popef_version import is_bare_popef, load_bare_popef
    from serving.model_server.servable import Servable
    from serving.model_server.warmup import warm_up
    import tensorflow as tf

    def load_once(name, version, path):
        """Loads the version (opening its PopEF files) and replays its warm-up records: it
        only becomes AVAILABLE once both succeeded. Warm-up runs on the model itself, so a
        signature the batcher cannot batch fails its own requests, not the whole version."""
        if is_bare_popef(path):   # run by the runtime directly: no TensorFlow, no batcher
            return load_bare_popef(name, version, path)
        servable = Servable(name, version, path, options.saved_model_tags.split(","))
        servable.load()
        if options.enable_model_warmup:
            try:
                warm_up(servable, path, options.num_request_iterations_for_warmup)
            except BaseException:
                servable.unload()
                raise
        if scheduler is not None:
            per_model = None
            params = os.path.join(path, PER_MODEL_BATCHING_FILE)
            if options.enable_per_model_batching_parameters and tf.io.gfile.exists(params):
                per_model = load_batching_options(params)
            servable = BatchingServable(servable, scheduler, per_model)
        return servable

    def load_servable(name, version, path):
        for attempt in range(options.max_num_load_retries + 1):
            try:
                return load_once(name, version, path)
            except Exception as error:
                code = as_serving_error(error).code
                if (attempt == options.max_num_load_retries or code not in _TRANSIENT
                        or stopping.is_set()):
                    raise
                log.warning("Loading %s version %s failed (%s); retrying in %.1f s", name,
                            version, code.name, options.load_retry_interval_micros / 1e6)
                if stopping.wait(max(options.load_retry_interval_micros, 0) / 1e6):
                    raise
    return load_servable


_TRANSIENT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.ABORTED,
              grpc.StatusCode.DEADLINE_EXCEEDED)
PER_MODEL_BATCHING_FILE = "batching_params.pbtxt"


def _apply_platform_config(options):
    """(options, BatchingOptions or None) after --platform_config_file, read as TF Serving
    does: the "tensorflow" platform's SavedModelBundleSourceAdapterConfig.legacy_config
    (SessionBundleConfig) decides batching, session threads, tags and warm-up, and the flags
    for those are ignored."""
    from serving.model_server.batching import BatchingOptions, load_batching_options
    from serving.model_server.errors import invalid_argument
    from serving.model_server.server_protos import (PlatformConfigMap,
                                                    SavedModelBundleSourceAdapterConfig,
                                                    parse_text_file, warn_unused_fields)
    if not options.platform_config_file:
        batching = (load_batching_options(options.batching_parameters_file)
                    if options.enable_batching else None)
        return options, batching
    path = options.platform_config_file
    platforms = parse_text_file(path, PlatformConfigMap).platform_configs
    if set(platforms) != {"tensorflow"}:
        raise invalid_argument(f"{path}: platforms {sorted(platforms)}: this server serves "
                               "exactly the \"tensorflow\" platform (SavedModels, PopEF ones "
                               "included)")
    adapter = SavedModelBundleSourceAdapterConfig()
    packed = platforms["tensorflow"].source_adapter_config
    if not packed.Unpack(adapter):
        raise invalid_argument(f"{path}: platform tensorflow: source_adapter_config holds "
                               f"{packed.type_url or 'nothing'}; expected a "
                               "tensorflow.serving.SavedModelBundleSourceAdapterConfig")
    legacy = adapter.legacy_config
    warn_unused_fields(legacy, {"batching_parameters", "saved_model_tags",
                                "session_config.intra_op_parallelism_threads",
                                "session_config.inter_op_parallelism_threads",
                                "enable_model_warmup",
                                "model_warmup_options.num_request_iterations"}, path, {})
    batching = (BatchingOptions.from_proto(legacy.batching_parameters, path)
                if legacy.HasField("batching_parameters") else None)
    iterations = legacy.model_warmup_options.num_request_iterations
    options = dataclasses.replace(
        options, enable_batching=batching is not None,
        saved_model_tags=",".join(legacy.saved_model_tags) or options.saved_model_tags,
        tensorflow_session_parallelism=0,
        tensorflow_intra_op_parallelism=legacy.session_config.intra_op_parallelism_threads,
        tensorflow_inter_op_parallelism=legacy.session_config.inter_op_parallelism_threads,
        enable_model_warmup=legacy.enable_model_warmup,
        num_request_iterations_for_warmup=(iterations.value if legacy.model_warmup_options
                                           .HasField("num_request_iterations") else 1))
    return options, batching


def _configure_tensorflow_threads(options) -> None:
    import tensorflow as tf
    intra, inter = tensorflow_thread_counts(options)
    if intra:
        tf.config.threading.set_intra_op_parallelism_threads(intra)
    if inter:
        tf.config.threading.set_inter_op_parallelism_threads(inter)


def tensorflow_thread_counts(options):
    """(intra-op, inter-op) threads, 0 = TensorFlow's default. TF Serving's precedence:
    --tensorflow_intra/inter_op_parallelism, else --tensorflow_session_parallelism, else the
    ConfigProto in --tensorflow_session_config_file."""
    from tensorflow.core.protobuf.config_pb2 import ConfigProto
    from serving.model_server.server_protos import parse_text_file, warn_unused_fields
    intra = inter = options.tensorflow_session_parallelism
    if options.tensorflow_session_config_file:
        session = parse_text_file(options.tensorflow_session_config_file, ConfigProto)
        warn_unused_fields(session, {"intra_op_parallelism_threads",
                                     "inter_op_parallelism_threads"},
                           options.tensorflow_session_config_file,
                           {}, "only the thread counts of a session config apply here")
        intra = intra or session.intra_op_parallelism_threads
        inter = inter or session.inter_op_parallelism_threads
    return (options.tensorflow_intra_op_parallelism or intra,
            options.tensorflow_inter_op_parallelism or inter)


def _server_credentials(options):
    if options.use_alts_credentials:
        return grpc.alts_server_credentials()
    if options.ssl_config_file:
        return _ssl_credentials(options.ssl_config_file)
    return None


def _ssl_config(path: str):
    from serving.model_server.server_protos import SSLConfig, parse_text_file
    return parse_text_file(path, SSLConfig)


def _ssl_credentials(path: str):
    config = _ssl_config(path)
    pairs = [(config.server_key.encode(), config.server_cert.encode())]
    root = config.custom_ca.encode() if config.custom_ca else None
    return grpc.ssl_server_credentials(pairs, root_certificates=root,
                                       require_client_auth=config.client_verify)


def grpc_server_options(channel_arguments: str):
    """TF Serving's server options: messages up to INT32_MAX both ways, then
    --grpc_channel_arguments (which may lower them)."""
    merged = {"grpc.max_receive_message_length": INT32_MAX,
              "grpc.max_send_message_length": INT32_MAX}
    merged.update(parse_channel_arguments(channel_arguments))
    return list(merged.items())


def _start_grpc(options, core, kserve):
    """(started server, TCP port, health service or None); OSError naming the address that
    cannot be bound."""
    from serving.model_server.grpc_handlers import add_services
    from serving.model_server.health import add_health_service
    from serving.model_server.kserve_grpc import add_inference_service
    threads = options.grpc_max_threads or default_thread_count()
    # RPCs waiting for a thread are bounded too: past the bound gRPC answers
    # RESOURCE_EXHAUSTED at once.
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(
        threads, thread_name_prefix="grpc"), options=grpc_server_options(
        options.grpc_channel_arguments),
        maximum_concurrent_rpcs=options.max_queued_requests or None)
    add_services(server, core)
    add_inference_service(server, kserve)
    health = add_health_service(server) if options.enable_grpc_healthcheck_service else None
    credentials = _server_credentials(options)
    addresses = [f"{options.bind_address}:{options.port}"]
    if options.grpc_socket_path:
        addresses.append(f"unix:{os.path.abspath(options.grpc_socket_path)}")
    ports = []
    for address in addresses:
        try:
            ports.append(server.add_secure_port(address, credentials) if credentials
                         else server.add_insecure_port(address))
        except RuntimeError:
            ports.append(0)
        if not ports[-1]:
            raise OSError(f"cannot bind gRPC to {address}")
    server.start()
    return server, ports[0], health


def _start_native_inference(options, kserve):
    """(native KServe v2 listener or None, its port): the C++ gRPC front end on
    --grpc_inference_port, with the gRPC port's TLS and message limits, and
    --max_queued_requests as its bound on RPCs held at once (its synchronous server holds a
    thread per RPC, so threads are not a separate bound as --grpc_max_threads is on --port)."""
    if not options.grpc_inference_port:
        return None, 0
    from serving.model_server.kserve_native import NativeInferenceListener
    listener = NativeInferenceListener(kserve, options.max_decoded_tensor_bytes)
    port = listener.start(
        f"{options.bind_address}:{options.grpc_inference_port}",
        options.max_queued_requests,
        grpc_server_options(options.grpc_channel_arguments),
        _ssl_config(options.ssl_config_file) if options.ssl_config_file else None)
    return listener, port


def run(options) -> int:
    from serving.model_server.core import ServerCore
    from serving.model_server.custom_ops import load_custom_ops
    from serving.model_server.inference import set_signature_method_name_check
    from serving.model_server.request_limits import set_max_decoded_tensor_bytes
    from serving.model_server.rest_handlers import make_app
    from serving.model_server.batching import BatchScheduler
    from serving.model_server.metrics import ServerMetrics, prometheus_path
    from serving.model_server.kserve_rest import routes as kserve_routes
    from serving.model_server.kserve_service import KServeV2

    metrics = ServerMetrics()
    scheduler = None
    stopping = threading.Event()
    try:
        options, batching = _apply_platform_config(options)
        set_signature_method_name_check(options.enable_signature_method_name_check)
        set_max_decoded_tensor_bytes(options.max_decoded_tensor_bytes)
        _configure_tensorflow_threads(options)
        load_custom_ops(options.custom_op_paths)
        metrics_path = prometheus_path(options.monitoring_config_file)
        if batching is not None:
            scheduler = BatchScheduler(batching, observer=metrics)
        core = ServerCore(options, _build_load_servable(options, scheduler, stopping), metrics)
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

    try:
        kserve = KServeV2(core, metrics)          # KServe v2 / Triton protocol, both ports
        grpc_server, grpc_port, health = _start_grpc(options, core, kserve)
        native, native_port = _start_native_inference(options, kserve)
    except OSError as error:
        print(f"Failed to start server. Error: {error}", file=sys.stderr, flush=True)
        return 1
    print(f"Running gRPC ModelServer at {options.bind_address}:{grpc_port} ...", flush=True)
    if options.grpc_socket_path:
        print(f"Running gRPC ModelServer at UNIX socket {options.grpc_socket_path} ...",
              flush=True)
    if native is not None:
        print(f"Running native KServe v2 gRPC at {options.bind_address}:{native_port} ...",
              flush=True)

    rest = None
    rest_port = 0
    if options.rest_api_port:
        threads = options.rest_api_num_threads or default_thread_count()
        pool = concurrent.futures.ThreadPoolExecutor(threads, thread_name_prefix="rest")
        app = make_app(core, pool, options.rest_api_timeout_in_ms, metrics, metrics_path,
                       cors=options.rest_api_enable_cors_support)
        app.add_handlers(r".*", kserve_routes(kserve, core, pool, (
            options.rest_api_timeout_in_ms or 0) / 1000.0, options.rest_api_enable_cors_support))
        rest = RestServer(app, pool, options.bind_address, options.rest_api_port,
                          options.rest_api_max_body_bytes)
        rest_port = rest.start()
        print(f"Exporting HTTP/REST API at:{options.bind_address}:{rest_port} ...", flush=True)
    if options.port_file:
        with open(options.port_file + ".tmp", "w", encoding="utf-8") as handle:
            json.dump({"grpc_port": grpc_port, "rest_api_port": rest_port,
                       "grpc_inference_port": native_port}, handle)
        os.replace(options.port_file + ".tmp", options.port_file)

    received = []

    def on_signal(signum, frame):
        received.append(signum)
        stopping.set()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while not stopping.wait(0.5):
        pass
    started = time.monotonic()
    log.info("Received %s: draining in-flight requests", signal.Signals(received[0]).name)
    # Load balancers and probes see NOT_SERVING first; Watch streams then end so they do not
    # hold the drain; then the listeners close while in-flight requests finish.
    if health is not None:
        health.shut_down()
    core.stop()
    grpc_done = grpc_server.stop(DRAIN_GRACE_S)
    native_stop = None
    if native is not None:   # drains alongside the other listeners
        native_stop = threading.Thread(target=native.stop, args=(DRAIN_GRACE_S,),
                                       name="native-grpc-stop")
        native_stop.start()
    if rest is not None:
        rest.stop(DRAIN_GRACE_S)
    grpc_done.wait(DRAIN_GRACE_S)
    if native_stop is not None:
        native_stop.join(DRAIN_GRACE_S + 10)
    if scheduler is not None:
        scheduler.stop()
    core.manager.unload_all()
    print(f"Server stopped cleanly in {time.monotonic() - started:.2f} s", flush=True)
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
    code = run(options)
    # Exit at once: models are unloaded and every connection is closed; TensorFlow's
    # interpreter teardown would add ~2 s to the shutdown and frees nothing the exit does not.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
