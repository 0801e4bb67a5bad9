"""Fuzz target: the compiler's YAML model-fusion path (cli_config.read_yaml, then the CLI's
compile_fused_from_settings) on mutated configs naming the seed models. The output folder is
forced into a scratch folder so a fuzzed config cannot write elsewhere. Anything but an
executable or a CompileError is a finding."""
import io
import os
import tempfile

from compiler import cli, cli_config
from compiler.errors import CompileError

import seeds

_folder = None


def _scratch() -> str:
    global _folder
    if _folder is None:
        _folder = tempfile.mkdtemp(prefix="fuzz_fusion_")
        seeds.write_fusion_models(_folder)
    return _folder


def check(data: bytes) -> None:
    folder = _scratch()
    path = os.path.join(folder, "config.yaml")
    with open(path, "wb") as f:
        f.write(data)
    try:
        settings = cli_config.defaults()
        settings.update(cli_config.read_yaml(path))
        if settings.get("model_fusion") is None:
            return
        settings["output_dir"] = os.path.join(folder, "out")
        settings["output_model"] = "executable"
        cli.compile_fused_from_settings(settings, out=io.StringIO())
    except CompileError:
        pass


def seed_inputs():
    return seeds.fusion_config_seeds()
