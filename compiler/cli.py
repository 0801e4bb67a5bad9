"""popef-compile / `python -m compiler.cli`: PopRT's command line.

    python -m compiler.cli --input_model model.onnx --input_shape X=4,2 --export_popef
    python -m compiler.cli --config_yaml config.yaml [flags that override the YAML]
    python -m compiler.cli --list_all_passes

Writes the converted ONNX to <output_dir>/<output_model>.onnx and, with --export_popef, the
PopEF to <output_dir>/<output_model>.popef. A YAML file with `model_fusion` fuses the listed
models into <output_dir>/<output_model>.popef (no ONNX is written); there, command-line flags
replace the YAML's top-level (global) keys and an entry's own keys still win for its model.
User errors print `error: ...` and exit 2.
"""
import argparse
import os
import sys
from typing import List, Optional

import onnx

from compiler import cli_config
from compiler.compiler import compile_converted
from compiler.converter import Converter, DEFAULT_PIPELINE, list_all_passes
from compiler.errors import CompileError
from compiler.executable import Executable
from compiler.fusion import FUSION_OPAQUE, fuse_models
from compiler.lowering.device_memory import available_bytes
from compiler.options import CompilerOptions
from popef.format import PopefError

EXIT_USER_ERROR = 2
EXIT_RUN_FAILED = 1


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one `error: ...` line like every other user error, exit 2
        self.exit(EXIT_USER_ERROR, f"error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    # SUPPRESS: only flags the user typed appear in the namespace, so they can override YAML.
    p = _Parser(prog="popef-compile", argument_default=argparse.SUPPRESS,
                                description="Convert an ONNX model and compile it to a PopEF file for the "
                                            "IPU emulator (PopRT-compatible flags).")
    p.add_argument("--input_model", help="ONNX model file, TensorFlow SavedModel folder or .keras file")
    p.add_argument("--signature_name", help="TensorFlow SavedModel signature to export (default serving_default)")
    p.add_argument("--input_shape", nargs="+", action="extend", metavar="NAME=d0,d1",
                   help="set input shapes, e.g. --input_shape X=4,2 Y=4,2 (repeatable)")
    p.add_argument("--precision", choices=["fp32", "fp16"], help="fp16 converts float32 to float16 (default fp32)")
    p.add_argument("--output_dir", help="folder for the outputs (default ./)")
    p.add_argument("--output_model", help="output file name stem (default executable)")
    p.add_argument("--export_popef", action="store_true", help="write <output_dir>/<output_model>.popef")
    p.add_argument("--max_tensor_size", type=int, help="largest constant folding may create, bytes (-1 unlimited)")
    p.add_argument("--ipu_version", choices=["ipu2", "ipu21"], help="target device (default ipu2)")
    p.add_argument("--batch_size", type=int, help="fix dim batch_axis of every input to this")
    p.add_argument("--batch_axis", type=int, help="the batch dimension (default 0)")
    p.add_argument("--convert_version", type=int,
                   help="convert the model to this opset first (TensorFlow models: export to it, default 17)")
    p.add_argument("--passes", help="comma list: run only these passes")
    p.add_argument("--skip_passes", help="comma list: passes not to run")
    p.add_argument("--list_all_passes", action="store_true", help="print the passes and exit")
    p.add_argument("--config_yaml", help="YAML file with the settings above (flags override it)")
    p.add_argument("--run", action="store_true", help="run once on the emulator with random inputs")
    return p


def resolve_settings(args: argparse.Namespace) -> dict:
    settings = cli_config.defaults()
    explicit = vars(args)
    if "config_yaml" in explicit:
        settings.update(cli_config.read_yaml(explicit["config_yaml"]))
    for key, value in explicit.items():
        if key in ("config_yaml", "list_all_passes"):
            continue
        if key == "input_shape":
            value = cli_config.parse_input_shapes(value)
        else:
            value = cli_config.normalize(key, value, "command line")
        settings[key] = value
    return settings


def print_passes(out=sys.stdout) -> None:
    passes = list_all_passes()
    width = max(len(p.name) for p in passes)
    for p in passes:
        marker = "*" if p.name in DEFAULT_PIPELINE else " "
        out.write(f"{marker} {p.name.ljust(width)}  {p.description}\n")
    out.write("(* = in the default pipeline, in this order: " + ", ".join(DEFAULT_PIPELINE) + ")\n")


def _output_stem(s: dict) -> str:
    stem = s["output_model"]
    for suffix in (".onnx", ".popef"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
    return stem


def compile_from_settings(s: dict, out=sys.stdout) -> Executable:
    if s.get("model_fusion") is not None:
        return compile_fused_from_settings(s, out)
    if not s["input_model"]:
        raise CompileError("--input_model is required (or input_model in --config_yaml)")
    options = CompilerOptions(ipu_version=s["ipu_version"], batch_size=s["batch_size"], batch_axis=s["batch_axis"],
                              max_tensor_size=s["max_tensor_size"]).validate()
    converter = Converter(input_shape=s["input_shape"], precision=s["precision"], batch_size=s["batch_size"],
                          batch_axis=s["batch_axis"], max_tensor_size=s["max_tensor_size"],
                          max_input_bytes=available_bytes(options.num_ipus, options.device_memory_bytes),
                          used_passes=s["passes"] or None, skip_passes=s["skip_passes"] or None,
                          convert_version=s["convert_version"], signature_name=s["signature_name"])
    model_path = s["input_model"]
    converted = converter.convert(model_path)
    executable = compile_converted(converted, options, model_path, converter.passes_run, converter.options)

    stem = _output_stem(s)
    out_dir = s["output_dir"]
    try:
        os.makedirs(out_dir, exist_ok=True)
        onnx_path = os.path.join(out_dir, f"{stem}.onnx")
        # Protobuf cannot serialize 2 GB or more: such models keep their weights beside the file.
        big = converted.ByteSize() >= 2**31 - 1
        onnx.save(converted, onnx_path, save_as_external_data=big, location=f"{stem}.onnx.data" if big else None)
        popef_path = os.path.join(out_dir, f"{stem}.popef") if s["export_popef"] else None
        if popef_path:
            executable.save(popef_path)
    except OSError as e:
        raise CompileError(f"cannot write the outputs to '{out_dir}': {e.strerror or e}") from None
    _print_summary(out, model_path, executable, converter.passes_run, onnx_path, popef_path, options)
    return executable


def compile_fused_from_settings(s: dict, out=sys.stdout) -> Executable:
    """Model fusion: the global settings are the defaults of every model_fusion entry."""
    if s["input_model"]:
        raise CompileError("--input_model cannot be combined with a model_fusion config; list every model to fuse "
                           "under model_fusion")
    options = CompilerOptions(ipu_version=s["ipu_version"], batch_size=s["batch_size"], batch_axis=s["batch_axis"],
                              max_tensor_size=s["max_tensor_size"]).validate()
    shared = {k: s[k] for k in cli_config.FUSION_ENTRY_KEYS if k not in ("input_model", "name")}
    executable = fuse_models([{**shared, **entry} for entry in s["model_fusion"]], options)
    out_dir = s["output_dir"]
    popef_path = os.path.join(out_dir, f"{_output_stem(s)}.popef")
    try:
        os.makedirs(out_dir, exist_ok=True)
        executable.save(popef_path)
    except OSError as e:
        raise CompileError(f"cannot write the outputs to '{out_dir}': {e.strerror or e}") from None
    _print_fused_summary(out, executable, popef_path, options)
    return executable


def _anchor_text(a: dict, original: Optional[str] = None) -> str:
    axis = "" if a["batch_axis"] < 0 else f" (batch axis {a['batch_axis']})"
    was = f" ({original})" if original is not None and original != a["name"] else ""
    return f"{a['name']}{was} {a['dtype']} {a['shape']}{axis}"


def _print_fused_summary(out, executable: Executable, popef_path: str, options: CompilerOptions) -> None:
    fusion = executable.opaque_json(FUSION_OPAQUE)
    index = fusion["index_anchor"]
    out.write(f"fused {len(fusion['subgraphs'])} model(s) for {options.ipu_version}; input '{index['name']}' "
              f"({index['dtype']} {index['shape']}) selects the subgraph\n")
    for sg in fusion["subgraphs"]:
        mine = {a["name"]: a for a in executable.anchors() if a["subgraph"] == sg["index"]}
        out.write(f"  [{sg['index']}] {sg['name']}: {sg['source_model']}, {sg['precision']}, opset {sg['opset']}, "
                  f"batch size {sg['batch_size']}\n")
        inputs = "; ".join(_anchor_text(mine[n], o) for n, o in sg["inputs"].items()) or "(none)"
        out.write(f"      inputs:  {inputs}\n")
        out.write(f"      outputs: {'; '.join(_anchor_text(mine[n], o) for n, o in sg['outputs'].items())}\n")
    mem = executable.metadata["device_memory"]
    out.write(f"  device memory: weights {mem['weights_bytes']:,} (deduplicated) + activations {mem['arena_bytes']:,} "
              f"(largest subgraph) = {mem['total_bytes']:,} bytes of "
              f"{available_bytes(options.num_ipus, options.device_memory_bytes):,}\n")
    out.write(f"  PopEF: {popef_path}\n")


def _print_summary(out, model_path, executable, passes, onnx_path, popef_path, options) -> None:
    anchor = _anchor_text
    mem = executable.metadata["device_memory"]
    out.write(f"compiled {model_path} for {options.ipu_version} (batch size {executable.metadata['batch_size']})\n")
    out.write(f"  inputs:  {'; '.join(anchor(a) for a in executable.anchors('input')) or '(none)'}\n")
    out.write(f"  outputs: {'; '.join(anchor(a) for a in executable.anchors('output'))}\n")
    out.write(f"  passes:  {', '.join(passes) or '(none)'}\n")
    fused = {}  # steps the compile step's kernel fusions made (docs/popef.md, internal ops)
    for step in executable.executable["programs"].get("main", []):
        if step.get("op", "").startswith("Fused"):
            fused[step["op"]] = fused.get(step["op"], 0) + 1
    out.write(f"  fused:   {', '.join(f'{n} {op}' for op, n in sorted(fused.items())) or '(none)'}\n")
    out.write(f"  device memory: weights {mem['weights_bytes']:,} + activations {mem['arena_bytes']:,} = "
              f"{mem['total_bytes']:,} bytes of {available_bytes(options.num_ipus, options.device_memory_bytes):,}\n")
    out.write(f"  converted ONNX: {onnx_path}\n")
    out.write(f"  PopEF: {popef_path}\n" if popef_path else "  PopEF: not written (add --export_popef)\n")


def run_once(executable: Executable, out=sys.stdout, seed: int = 0) -> dict:
    """Runs the executable once on the emulator with random inputs (a fused one: each subgraph
    once, selected by its index); returns the outputs."""
    import numpy as np
    try:
        from tf_popef_op.runtime import ModelRunner  # lazy: the compiler itself never needs it
    except ImportError as e:
        raise CompileError(f"--run needs the emulator runtime (tf_popef_op.runtime), which cannot be "
                           f"imported ({e}); build it with `make build`") from None
    rng = np.random.default_rng(seed)

    def random_input(a):
        dtype = np.dtype(a["dtype"])
        if dtype.kind == "f":
            return rng.uniform(0, 1, a["shape"]).astype(dtype)
        if dtype.kind == "b":
            return rng.integers(0, 2, a["shape"]).astype(dtype)
        return rng.integers(0, 10, a["shape"]).astype(dtype)

    runner = ModelRunner(executable)
    shared = [a for a in executable.anchors("input") if a.get("subgraph") is None]  # fusion: the index
    subgraphs = sorted({a.get("subgraph", 0) for a in executable.anchors() if a.get("subgraph") is not None})
    all_outputs = {}
    for index in subgraphs or [0]:
        inputs = {a["name"]: random_input(a) for a in executable.anchors("input") if a.get("subgraph") == index}
        inputs.update({a["name"]: np.full(a["shape"], index, a["dtype"]) for a in shared})
        outputs = {a["name"]: np.zeros(a["shape"], dtype=a["dtype"]) for a in executable.anchors("output")
                   if a.get("subgraph") == index}
        result = runner.execute(inputs, outputs)
        if isinstance(result, dict) and result:  # a runner may also return the outputs
            outputs = {k: np.asarray(v) for k, v in result.items()}
        all_outputs.update(outputs)
    out.write("ran once on the emulator with random inputs" + (" (each subgraph once)" if shared else "") + ":\n")
    for name, value in all_outputs.items():
        out.write(f"  {name}: {value.dtype} {list(value.shape)}\n")
    return all_outputs


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if getattr(args, "list_all_passes", False):
            print_passes()
            return 0
        settings = resolve_settings(args)
        executable = compile_from_settings(settings)
    except (CompileError, PopefError) as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USER_ERROR
    if settings["run"]:
        try:
            run_once(executable)
        except CompileError as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_USER_ERROR
        except Exception as e:  # the runtime's own errors (bad program, device...)
            print(f"error: running on the emulator failed: {e}", file=sys.stderr)
            return EXIT_RUN_FAILED
    return 0


if __name__ == "__main__":
    sys.exit(main())
