"""Command-line flags with tensorflow_model_server's names and defaults, into `ServerOptions`.

Every flag of TF Serving's main.cc is accepted. Flags for things this server does not have
(GPU, XLA, TFLite, TPU, ...) are listed in `IGNORED_FLAGS` with the reason, which is logged
as one warning line when such a flag is given. Flags are spelt `--name=value` or
`--name value`; booleans also accept a bare `--name` (like TF's flag parser). Unknown flags,
malformed values and conflicting combinations stop the server before it loads anything,
with a message naming the flag.
"""
import argparse
import dataclasses
import logging
import os
import sys
from typing import List, Optional

log = logging.getLogger("popef_model_server")

_TRUE = {"true", "1", "yes", "t", "y"}
_FALSE = {"false", "0", "no", "f", "n"}


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be in [0, 65535], got {value}")
    return value


@dataclasses.dataclass
class ServerOptions:
    """Everything the server is built from; one field per flag, TF Serving's defaults."""
    port: int = 8500                                  # gRPC port; 0 picks a free one
    grpc_socket_path: str = ""                        # also serve gRPC on this UNIX socket
    rest_api_port: int = 0                            # 0 = REST off (8501 in TF Serving's Docker)
    rest_api_num_threads: int = 0                     # 0 = 4 x cores, like TF Serving
    rest_api_timeout_in_ms: int = 30000
    rest_api_enable_cors_support: bool = False
    model_name: str = "default"
    model_base_path: str = ""
    model_config_file: str = ""
    model_config_file_poll_wait_seconds: int = 0      # 0 = read the config file once
    file_system_poll_wait_seconds: int = 1            # 0 = look for versions once
    num_load_threads: int = 0
    num_unload_threads: int = 0
    max_num_load_retries: int = 5
    load_retry_interval_micros: int = 60 * 1000 * 1000
    flush_filesystem_caches: bool = True
    enable_batching: bool = False
    batching_parameters_file: str = ""
    enable_per_model_batching_parameters: bool = False
    platform_config_file: str = ""
    monitoring_config_file: str = ""
    enable_model_warmup: bool = True
    num_request_iterations_for_warmup: int = 1
    allow_version_labels_for_unavailable_models: bool = False
    enable_grpc_healthcheck_service: bool = False
    enable_signature_method_name_check: bool = False
    enable_serialization_as_tensor_content: bool = False
    ssl_config_file: str = ""
    use_alts_credentials: bool = False
    grpc_channel_arguments: str = ""
    grpc_max_threads: int = 0                         # 0 = 4 x cores, like TF Serving
    tensorflow_session_parallelism: int = 0           # 0 = TensorFlow's default
    tensorflow_intra_op_parallelism: int = 0          # 0 = the session parallelism
    tensorflow_inter_op_parallelism: int = 0          # 0 = the session parallelism
    tensorflow_session_config_file: str = ""
    saved_model_tags: str = "serve"                   # comma-separated MetaGraph tags
    # TF Serving flags with nothing to act on here (IGNORED_FLAGS says why):
    per_process_gpu_memory_fraction: float = 0.0
    xla_cpu_compilation_enabled: bool = False
    xla_gpu_compilation_enabled: bool = False
    remove_unused_fields_from_bundle_metagraph: bool = True
    prefer_tflite_model: bool = False
    num_tflite_pools: int = 0
    num_tflite_interpreters_per_pool: int = 1
    enable_profiler: bool = True
    thread_pool_factory_config_file: str = ""
    mixed_precision: str = ""
    skip_initialize_tpu: bool = False
    # Beyond TF Serving:
    custom_op_paths: str = ""                         # ':'-separated op libraries to load
    bind_address: str = "0.0.0.0"                     # TF Serving always binds every interface
    port_file: str = ""                               # write the bound ports here (for port 0)
    rest_api_max_body_bytes: int = 2 ** 31 - 1        # larger REST bodies answer 413
    max_queued_requests: int = 1024                   # inference requests held at once; 0 = no bound
    max_queued_requests_per_model: int = 256          # the same per model name; 0 = no bound
    max_decoded_tensor_bytes: int = 2 ** 31 - 1       # one decoded input tensor at most
    grpc_inference_port: int = 0                      # native (C++) KServe v2 gRPC listener; 0 = off


_DEFAULTS = ServerOptions()

_NO_TFLITE = "TensorFlow Lite models are not served (SavedModels and PopEF only)"
_NO_XLA = "XLA JIT is not used: PopEF programs are compiled ahead of time"
IGNORED_FLAGS = {
    "per_process_gpu_memory_fraction": "there is no GPU: models run on the PopEF runtime",
    "xla_cpu_compilation_enabled": _NO_XLA,
    "xla_gpu_compilation_enabled": _NO_XLA,
    "remove_unused_fields_from_bundle_metagraph": "it trims TF Serving's C++ SavedModel "
                                                  "bundle; SavedModels load through "
                                                  "TensorFlow's Python loader here",
    "prefer_tflite_model": _NO_TFLITE,
    "num_tflite_pools": _NO_TFLITE,
    "num_tflite_interpreters_per_pool": _NO_TFLITE,
    "enable_profiler": "TensorFlow's profiler gRPC service is not served",
    "thread_pool_factory_config_file": "requests run on TensorFlow's process-wide thread "
                                       "pools (size them with --tensorflow_*_parallelism)",
    "mixed_precision": "precision is fixed when the PopEF is compiled",
    "skip_initialize_tpu": "there is no TPU to initialize",
    "flush_filesystem_caches": "the server keeps no file-system caches to flush",
    "num_unload_threads": "unloading only drops references and takes no measurable time",
    "num_load_threads": "versions load one at a time (each is opened and warmed up before it "
                        "serves), so rollouts happen in version order",
}


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="popef-model-server",
        description="TensorFlow-Serving-compatible model server for SavedModels, with the "
                    "PopEF op loaded (same flags as tensorflow_model_server).",
        allow_abbrev=False)
    kinds = {int: int, str: str, bool: _parse_bool, float: float}
    for field in dataclasses.fields(ServerOptions):
        default = getattr(_DEFAULTS, field.name)
        kind = kinds[type(default)]
        if field.name in ("port", "rest_api_port", "grpc_inference_port"):
            kind = _port
        extra = {"nargs": "?", "const": True} if isinstance(default, bool) else {}
        parser.add_argument(f"--{field.name}", type=kind, default=default,
                            metavar=type(default).__name__.upper(), **extra)
    parser.add_argument("--version", action="store_true",
                        help="print the server version and exit")
    return parser


class FlagError(ValueError):
    """Raised for a conflicting or malformed combination of flags."""


def parse_flags(argv: Optional[List[str]] = None) -> ServerOptions:
    """Parses argv (without the program name); exits with status 2 on unknown flags."""
    parser = _build_parser()
    namespace = parser.parse_args(argv)
    if namespace.version:
        from serving.model_server import SERVER_VERSION
        print(f"popef-model-server {SERVER_VERSION} (TensorFlow Serving API compatible)")
        sys.exit(0)
    values = {f.name: getattr(namespace, f.name) for f in dataclasses.fields(ServerOptions)}
    options = ServerOptions(**values)
    try:
        validate(options)
    except FlagError as error:
        parser.error(str(error))
    for name in given_flags(argv if argv is not None else sys.argv[1:]) & IGNORED_FLAGS.keys():
        log.warning("--%s is accepted but ignored: %s", name, IGNORED_FLAGS[name])
    return options


def given_flags(argv: List[str]) -> set:
    """Names of the flags spelt out in argv."""
    return {arg[2:].split("=", 1)[0] for arg in argv if arg.startswith("--")}


def validate(options: ServerOptions) -> None:
    """Rejects combinations tensorflow_model_server would reject or silently misread."""
    if not options.model_config_file and not options.model_base_path:
        raise FlagError("Both --model_base_path and --model_config_file are empty: give one "
                        "(a model directory with numbered version sub-directories, or a "
                        "text-format ModelServerConfig).")
    if options.model_config_file and options.model_base_path:
        raise FlagError("--model_config_file and --model_base_path cannot both be set: the "
                        "config file lists every model; put the base path in it.")
    if options.model_config_file and options.model_name != _DEFAULTS.model_name:
        raise FlagError("--model_name only applies with --model_base_path; with "
                        "--model_config_file the names come from the config file.")
    if options.model_config_file_poll_wait_seconds and not options.model_config_file:
        raise FlagError("--model_config_file_poll_wait_seconds needs --model_config_file.")
    if (options.batching_parameters_file and not options.enable_batching
            and not options.platform_config_file):
        raise FlagError("--batching_parameters_file is only read with --enable_batching; add "
                        "--enable_batching=true or drop the file.")
    if options.per_process_gpu_memory_fraction and not (
            0.0 <= options.per_process_gpu_memory_fraction <= 1.0):
        raise FlagError("--per_process_gpu_memory_fraction must be in [0, 1], got "
                        f"{options.per_process_gpu_memory_fraction}.")
    if options.use_alts_credentials and options.ssl_config_file:
        raise FlagError("--use_alts_credentials and --ssl_config_file both set the gRPC "
                        "credentials: give one.")
    if options.port and options.port == options.rest_api_port:
        raise FlagError(f"--port and --rest_api_port are both {options.port}: the gRPC and "
                        "REST servers need different ports.")
    if options.grpc_inference_port and options.grpc_inference_port in (options.port,
                                                                       options.rest_api_port):
        raise FlagError(f"--grpc_inference_port={options.grpc_inference_port} is also --port or "
                        "--rest_api_port: the native KServe v2 listener needs its own port.")
    if options.grpc_inference_port and options.use_alts_credentials:
        raise FlagError("--grpc_inference_port does not support --use_alts_credentials (TLS "
                        "through --ssl_config_file, or plaintext).")
    for name in ("model_config_file_poll_wait_seconds", "file_system_poll_wait_seconds",
                 "rest_api_timeout_in_ms", "num_request_iterations_for_warmup",
                 "max_num_load_retries", "rest_api_num_threads", "grpc_max_threads",
                 "tensorflow_intra_op_parallelism", "tensorflow_inter_op_parallelism",
                 "tensorflow_session_parallelism", "num_load_threads", "num_unload_threads",
                 "num_tflite_pools", "num_tflite_interpreters_per_pool",
                 "max_queued_requests", "max_queued_requests_per_model"):
        if getattr(options, name) < 0:
            raise FlagError(f"--{name} must be >= 0, got {getattr(options, name)}.")
    for name in ("rest_api_max_body_bytes", "max_decoded_tensor_bytes"):
        if getattr(options, name) <= 0:
            raise FlagError(f"--{name} must be > 0, got {getattr(options, name)}.")
    for name in ("model_config_file", "batching_parameters_file", "monitoring_config_file",
                 "ssl_config_file", "platform_config_file", "tensorflow_session_config_file"):
        path = getattr(options, name)
        if path and not _file_exists(path):
            raise FlagError(f"--{name}={path}: no such file.")
    for path in filter(None, options.custom_op_paths.split(":")):
        if not os.path.isfile(path):
            raise FlagError(f"--custom_op_paths: no such op library {path}.")
    if not [t for t in options.saved_model_tags.split(",") if t.strip()]:
        raise FlagError("--saved_model_tags is empty: give the MetaGraph tags, e.g. serve")
    if options.grpc_channel_arguments:
        parse_channel_arguments(options.grpc_channel_arguments)


def _file_exists(path: str) -> bool:
    if "://" not in path:
        return os.path.isfile(path)
    import tensorflow as tf   # any file system TensorFlow knows (gs://, s3://, ram://, ...)
    return tf.io.gfile.exists(path) and not tf.io.gfile.isdir(path)


def parse_channel_arguments(text: str):
    """`--grpc_channel_arguments=a=1,b=x` into gRPC options (ints where they parse)."""
    arguments = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise FlagError(f"--grpc_channel_arguments: expected key=value, got {item!r}.")
        try:
            arguments.append((key, int(value)))
        except ValueError:
            arguments.append((key, value))
    return arguments


def default_thread_count() -> int:
    return 4 * (os.cpu_count() or 1)
