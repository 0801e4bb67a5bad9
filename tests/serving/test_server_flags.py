"""Flags: every flag of TF Serving's main.cc is accepted, with TF Serving's names and
defaults; ignored ones warn once; unknown and conflicting flags fail fast."""
import logging
import subprocess
import sys

import pytest

from serving.model_server.flags import (IGNORED_FLAGS, ServerOptions, parse_channel_arguments,
                                        parse_flags)
from serving.model_server.server import INT32_MAX, grpc_server_options
from serving_harness import REPO

# Every tensorflow::Flag in tensorflow_serving/model_servers/main.cc, newest upstream copy
# available (github.com/tensorflow/serving; the 2.1x flag list, with --mixed_precision,
# --skip_initialize_tpu, --enable_grpc_healthcheck_service,
# --enable_serialization_as_tensor_content and --xla_gpu_compilation_enabled), with a value
# of the flag's type. --version is tested separately (it exits).
UPSTREAM_MAIN_CC_FLAGS = [
    ("port", "8500"), ("grpc_socket_path", "/tmp/popef-test.sock"), ("rest_api_port", "8501"),
    ("rest_api_num_threads", "4"), ("rest_api_timeout_in_ms", "30000"),
    ("rest_api_enable_cors_support", "true"), ("enable_batching", "true"),
    ("allow_version_labels_for_unavailable_models", "true"),
    ("batching_parameters_file", None), ("enable_per_model_batching_parameters", "true"),
    ("model_config_file", None), ("model_config_file_poll_wait_seconds", "0"),
    ("model_name", "m"), ("model_base_path", "/models/m"), ("num_load_threads", "2"),
    ("num_unload_threads", "2"), ("max_num_load_retries", "1"),
    ("load_retry_interval_micros", "1000"), ("file_system_poll_wait_seconds", "1"),
    ("flush_filesystem_caches", "true"), ("tensorflow_session_parallelism", "2"),
    ("tensorflow_session_config_file", None), ("tensorflow_intra_op_parallelism", "2"),
    ("tensorflow_inter_op_parallelism", "2"), ("use_alts_credentials", "false"),
    ("ssl_config_file", None), ("platform_config_file", None),
    ("per_process_gpu_memory_fraction", "0.5"), ("saved_model_tags", "serve"),
    ("grpc_channel_arguments", "grpc.max_connection_age_ms=2000"),
    ("grpc_max_threads", "8"), ("enable_model_warmup", "true"),
    ("num_request_iterations_for_warmup", "1"), ("monitoring_config_file", None),
    ("remove_unused_fields_from_bundle_metagraph", "true"), ("prefer_tflite_model", "false"),
    ("num_tflite_pools", "2"), ("num_tflite_interpreters_per_pool", "1"),
    ("enable_signature_method_name_check", "true"), ("xla_cpu_compilation_enabled", "false"),
    ("xla_gpu_compilation_enabled", "false"), ("enable_profiler", "true"),
    ("thread_pool_factory_config_file", "/etc/threads.pbtxt"), ("mixed_precision", "bfloat16"),
    ("skip_initialize_tpu", "true"), ("enable_grpc_healthcheck_service", "true"),
    ("enable_serialization_as_tensor_content", "true"),
]


def _accepting_argv(name, value, text_file):
    """argv giving `--name=value` plus whatever the flag needs to be valid on its own."""
    value = text_file if value is None else value
    base = [] if name in ("model_base_path", "model_config_file") else ["--model_base_path=/m"]
    if name == "batching_parameters_file":
        base.append("--enable_batching")
    if name == "model_config_file_poll_wait_seconds":
        base = [f"--model_config_file={text_file}"]
    return base + [f"--{name}={value}"]


@pytest.mark.parametrize("name, value", UPSTREAM_MAIN_CC_FLAGS,
                         ids=[name for name, _ in UPSTREAM_MAIN_CC_FLAGS])
def test_every_upstream_flag_is_accepted(name, value, tmp_path, caplog):
    text_file = tmp_path / "config.pbtxt"
    text_file.write_text("")
    with caplog.at_level(logging.WARNING, logger="popef_model_server"):
        options = parse_flags(_accepting_argv(name, value, str(text_file)))
    assert hasattr(options, name)
    warnings = [r.getMessage() for r in caplog.records]
    if name in IGNORED_FLAGS:
        assert warnings == [f"--{name} is accepted but ignored: {IGNORED_FLAGS[name]}"]
    else:
        assert warnings == []


def test_upstream_list_covers_every_option_with_a_tf_serving_name():
    ours_only = {"custom_op_paths", "bind_address", "port_file", "rest_api_max_body_bytes",
                 "max_queued_requests", "max_queued_requests_per_model",
                 "max_decoded_tensor_bytes", "grpc_inference_port"}
    options = {f.name for f in __import__("dataclasses").fields(ServerOptions)}
    assert options - ours_only == {name for name, _ in UPSTREAM_MAIN_CC_FLAGS}


def test_version_flag_prints_and_exits(capsys):
    with pytest.raises(SystemExit) as caught:
        parse_flags(["--version"])
    assert caught.value.code == 0
    assert "popef-model-server" in capsys.readouterr().out


def test_grpc_messages_default_to_int32_max_unless_channel_arguments_say_otherwise():
    assert dict(grpc_server_options("")) == {"grpc.max_receive_message_length": INT32_MAX,
                                            "grpc.max_send_message_length": INT32_MAX}
    lowered = dict(grpc_server_options("grpc.max_receive_message_length=1024,grpc.x=y"))
    assert lowered == {"grpc.max_receive_message_length": 1024,
                       "grpc.max_send_message_length": INT32_MAX, "grpc.x": "y"}


def test_defaults_match_tensorflow_model_server():
    options = parse_flags(["--model_base_path=/models/m"])
    assert (options.port, options.rest_api_port, options.model_name) == (8500, 0, "default")
    assert options.file_system_poll_wait_seconds == 1
    assert options.rest_api_timeout_in_ms == 30000
    assert options.enable_batching is False and options.enable_model_warmup is True
    assert options.enable_grpc_healthcheck_service is False


@pytest.mark.parametrize("argv, field, value", [
    (["--enable_batching"], "enable_batching", True),
    (["--enable_batching=false"], "enable_batching", False),
    (["--enable_model_warmup=0"], "enable_model_warmup", False),
    (["--port", "9000"], "port", 9000),
    (["--rest_api_port=8501"], "rest_api_port", 8501),
    (["--model_name=resnet"], "model_name", "resnet"),
])
def test_flag_spellings(argv, field, value):
    options = parse_flags(["--model_base_path=/m", *argv])
    assert getattr(options, field) == value


@pytest.mark.parametrize("argv, fragment", [
    ([], "Both --model_base_path and --model_config_file are empty"),
    (["--model_base_path=/m", "--model_config_file=/etc/hosts"], "cannot both be set"),
    (["--model_base_path=/m", "--batching_parameters_file=/etc/hosts"], "--enable_batching"),
    (["--model_base_path=/m", "--port=8500", "--rest_api_port=8500"], "different ports"),
    (["--model_base_path=/m", "--enable_batching=maybe"], "expected true or false"),
    (["--model_base_path=/m", "--port=70000"], "port must be in"),
    (["--model_base_path=/m", "--monitoring_config_file=/no/such"], "no such file"),
    (["--model_base_path=/m", "--custom_op_paths=/no/such.so"], "no such op library"),
    (["--model_base_path=/m", "--grpc_channel_arguments=novalue"], "key=value"),
    (["--model_base_path=/m", "--model_config_file_poll_wait_seconds=5"],
     "needs --model_config_file"),
    (["--model_base_path=/m", "--no_such_flag=1"], "unrecognized arguments: --no_such_flag"),
    (["--model_base_path=/m", "--per_process_gpu_memory_fraction=2"], "must be in [0, 1]"),
    (["--model_base_path=/m", "--num_load_threads=-1"], "--num_load_threads must be >= 0"),
    (["--model_base_path=/m", "--platform_config_file=/no/such"], "no such file"),
    (["--model_base_path=/m", "--use_alts_credentials", "--ssl_config_file=/etc/hosts"],
     "give one"),
    (["--model_base_path=/m", "--rest_api_port=8501", "--grpc_inference_port=8501"],
     "needs its own port"),
    (["--model_base_path=/m", "--grpc_inference_port=8001", "--use_alts_credentials"],
     "does not support --use_alts_credentials"),
    (["--model_base_path=/m", "--grpc_inference_port=-1"], "port must be in"),
])
def test_bad_flags_fail_fast(argv, fragment, capsys):
    with pytest.raises(SystemExit) as caught:
        parse_flags(argv)
    assert caught.value.code == 2
    assert fragment in capsys.readouterr().err


def test_channel_arguments():
    assert parse_channel_arguments("grpc.max_send_message_length=100,grpc.lb_policy_name=x") == [
        ("grpc.max_send_message_length", 100), ("grpc.lb_policy_name", "x")]


def test_every_option_is_a_flag():
    import dataclasses
    flags = {f"--{f.name}" for f in dataclasses.fields(ServerOptions)}
    assert {"--port", "--rest_api_port", "--model_config_file", "--custom_op_paths",
            "--enable_grpc_healthcheck_service", "--ssl_config_file"} <= flags


def test_unknown_flag_exits_before_loading_anything():
    result = subprocess.run([sys.executable, "-m", "serving.model_server", "--model_base_path=/m",
                             "--bogus"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "unrecognized arguments: --bogus" in result.stderr


def test_threading_and_tag_flags():
    options = parse_flags(["--model_base_path=/m", "--tensorflow_intra_op_parallelism=2",
                           "--tensorflow_inter_op_parallelism=1", "--saved_model_tags=serve,tpu"])
    assert (options.tensorflow_intra_op_parallelism, options.tensorflow_inter_op_parallelism,
            options.saved_model_tags) == (2, 1, "serve,tpu")


def test_model_that_cannot_load_stops_the_start(tmp_path):
    from serving_harness import ServerProcess
    from serving_models import save_affine
    save_affine(str(tmp_path / "models" / "m" / "1"))
    server = ServerProcess(tmp_path / "server", "--model_name=m",
                           f"--model_base_path={tmp_path / 'models' / 'm'}",
                           "--saved_model_tags=gpu", rest=False)
    with pytest.raises(RuntimeError) as caught:
        server.start()
    assert "server exited with 1" in str(caught.value)
    assert "Failed to start server" in str(caught.value)
    assert "Could not find meta graph def matching supplied tags: { gpu }" in str(caught.value)


@pytest.mark.parametrize("error, attempts", [("unavailable", 3), ("invalid_argument", 1)])
def test_load_retries_transient_errors_only(monkeypatch, error, attempts):
    import threading
    from serving.model_server import errors, servable
    from serving.model_server.server import _build_load_servable
    calls = []

    class FlakyServable:
        def __init__(self, name, version, path, tags):
            pass

        def load(self):
            calls.append(1)
            if len(calls) < 3:
                raise getattr(errors, error)("disk hiccup")
    monkeypatch.setattr(servable, "Servable", FlakyServable)
    options = parse_flags(["--model_base_path=/m", "--max_num_load_retries=2",
                           "--load_retry_interval_micros=1000", "--enable_model_warmup=false"])
    load = _build_load_servable(options, None, threading.Event())
    if attempts == 3:
        assert isinstance(load("m", 1, "/m/1"), FlakyServable)
    else:
        with pytest.raises(errors.ServingError):
            load("m", 1, "/m/1")
    assert len(calls) == attempts


@pytest.mark.parametrize("text, fragment", [
    ('platform_configs { key: "tflite" value {} }', "exactly the \"tensorflow\" platform"),
    ('platform_configs { key: "tensorflow" value {} }', "holds nothing; expected a "
                                                        "tensorflow.serving.SavedModelBundle"),
])
def test_platform_config_errors_name_the_file_and_problem(tmp_path, text, fragment):
    from serving.model_server.errors import ServingError
    from serving.model_server.server import _apply_platform_config
    path = tmp_path / "platform.config"
    path.write_text(text)
    with pytest.raises(ServingError) as caught:
        _apply_platform_config(parse_flags(["--model_base_path=/m",
                                            f"--platform_config_file={path}"]))
    assert str(path) in caught.value.message and fragment in caught.value.message


def test_tensorflow_thread_counts_follow_tf_serving_precedence(tmp_path, caplog):
    from serving.model_server.server import tensorflow_thread_counts
    session = tmp_path / "session.config"
    session.write_text("intra_op_parallelism_threads: 3 inter_op_parallelism_threads: 5 "
                       "allow_soft_placement: true")

    def counts(*flags):
        return tensorflow_thread_counts(parse_flags(["--model_base_path=/m", *flags]))
    assert counts() == (0, 0)
    assert counts("--tensorflow_session_parallelism=2") == (2, 2)
    with caplog.at_level(logging.WARNING, logger="popef_model_server"):
        assert counts(f"--tensorflow_session_config_file={session}") == (3, 5)
    assert any("allow_soft_placement is accepted but ignored" in r.getMessage()
               for r in caplog.records)
    assert counts(f"--tensorflow_session_config_file={session}",
                  "--tensorflow_session_parallelism=2") == (2, 2)
    assert counts("--tensorflow_session_parallelism=2",
                  "--tensorflow_intra_op_parallelism=4") == (4, 2)


def test_alts_flag_selects_alts_server_credentials():
    import grpc
    from serving.model_server.server import _server_credentials
    options = parse_flags(["--model_base_path=/m", "--use_alts_credentials"])
    assert isinstance(_server_credentials(options), grpc.ServerCredentials)
    assert _server_credentials(parse_flags(["--model_base_path=/m"])) is None
