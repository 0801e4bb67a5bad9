"""Flags: TF Serving's names and defaults; unknown and conflicting flags fail fast."""
import subprocess
import sys

import pytest

from serving.model_server.flags import ServerOptions, parse_channel_arguments, parse_flags
from serving_harness import REPO


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
