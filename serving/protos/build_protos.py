"""Compiles the upstream `.proto` files in third_party/proto/ into serving/protos/ with
grpcio-tools (run by setup.py's build_ext; `python serving/protos/build_protos.py` by hand).

third_party/proto/<origin>/<upstream path>.proto becomes
serving/protos/<origin>/<upstream path>_pb2.py (and `_pb2_grpc.py` for files with a service).
protoc writes imports by upstream path (`from tensorflow_serving.config import x_pb2`,
`import model_config_pb2`); those naming a file compiled here are rewritten to its module
under serving.protos, so the generated package never shadows TensorFlow Serving's or Triton's
own Python packages. Imports of files that are not here (TensorFlow's `tensorflow/core/...`)
are handed to protoc as descriptors taken from the modules TensorFlow already ships, and the
generated code keeps importing those modules.
"""
import importlib
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROTO_DIR = ROOT / "third_party" / "proto"
PACKAGE = "serving.protos"

_IMPORT = re.compile(r'^\s*import\s+(?:public\s+|weak\s+)?"([^"]+)"\s*;', re.M)
_SERVICE = re.compile(r"^\s*service\s+\w+", re.M)


def _sources(proto_dir: Path):
    """{upstream path: (origin, file)} of every vendored .proto."""
    found = {}
    for origin in sorted(p for p in proto_dir.iterdir() if p.is_dir()):
        for path in sorted(origin.rglob("*.proto")):
            found[path.relative_to(origin).as_posix()] = (origin.name, path)
    return found


def _external_descriptor_set(sources, include_dirs) -> bytes:
    """A FileDescriptorSet of the imported files that are neither vendored nor protobuf's
    well-known types, taken from their already-generated Python modules."""
    from google.protobuf import descriptor_pb2
    wanted = set()
    for _, path in sources.values():
        for name in _IMPORT.findall(path.read_text(encoding="utf-8")):
            if name not in sources and not any((d / name).exists() for d in include_dirs):
                wanted.add(name)
    files, seen = descriptor_pb2.FileDescriptorSet(), set()

    def add(descriptor):
        if descriptor.name in seen:
            return
        seen.add(descriptor.name)
        for dependency in descriptor.dependencies:
            add(dependency)
        proto = descriptor_pb2.FileDescriptorProto()
        descriptor.CopyToProto(proto)
        files.file.append(proto)

    for name in sorted(wanted):
        module_name = name[:-len(".proto")].replace("/", ".") + "_pb2"
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            raise RuntimeError(f"build_protos: {name} is imported by a vendored .proto but is "
                               f"neither vendored nor importable as {module_name}") from None
        add(module.DESCRIPTOR)
    return files.SerializeToString()


def _module_of(sources, package: str, upstream_path: str) -> str:
    origin, _ = sources[upstream_path]
    return ".".join([package, origin] + upstream_path[:-len(".proto")].split("/")[:-1])


def _rewrite_imports(text: str, sources, package: str) -> str:
    """Points imports of vendored files at their serving.protos modules."""
    def from_import(match):
        directory, module, rest = match.group(1), match.group(2), match.group(3)
        upstream = f"{directory.replace('.', '/')}/{module[:-len('_pb2')]}.proto"
        if upstream not in sources:
            return match.group(0)
        return f"from {_module_of(sources, package, upstream)} import {module}{rest}"

    def plain_import(match):
        module, rest = match.group(1), match.group(2)
        upstream = f"{module[:-len('_pb2')]}.proto"
        if upstream not in sources:
            return match.group(0)
        return f"from {_module_of(sources, package, upstream)} import {module}{rest}"

    text = re.sub(r"^from ([\w.]+) import (\w+_pb2)((?: as \w+)?)$", from_import, text, flags=re.M)
    return re.sub(r"^import (\w+_pb2)((?: as \w+)?)$", plain_import, text, flags=re.M)


def build(out_dir: Path = ROOT / "serving" / "protos", proto_dir: Path = PROTO_DIR,
          package: str = PACKAGE) -> list:
    """Generates every module of `proto_dir` into `out_dir` (the directory of Python package
    `package`); returns the written paths. Raises RuntimeError on a protoc error."""
    import grpc_tools
    sources = _sources(proto_dir)
    well_known = Path(grpc_tools.__file__).resolve().parent / "_proto"
    origins = sorted({origin for origin, _ in sources.values()})
    include_dirs = [proto_dir / o for o in origins] + [well_known]
    written = []
    with tempfile.TemporaryDirectory() as scratch:
        descriptor_set = Path(scratch) / "external.pb"
        descriptor_set.write_bytes(_external_descriptor_set(sources, include_dirs))
        for origin in origins:
            files = [p for o, p in sources.values() if o == origin]
            services = [p for p in files if _SERVICE.search(p.read_text(encoding="utf-8"))]
            target = out_dir / origin
            target.mkdir(parents=True, exist_ok=True)
            args = [f"-I{d}" for d in include_dirs] + [
                f"--descriptor_set_in={descriptor_set}", f"--python_out={target}"]
            _protoc(args + [str(p) for p in files])
            if services:
                _protoc(args + [f"--grpc_python_out={target}"] + [str(p) for p in services])
            for generated in sorted(target.rglob("*_pb2*.py")):
                generated.write_text(_rewrite_imports(generated.read_text(encoding="utf-8"),
                                                      sources, package), encoding="utf-8")
                written.append(generated)
            for package_dir in [target, *(d for d in target.rglob("*") if d.is_dir())]:
                init = package_dir / "__init__.py"
                if not init.exists() and package_dir.name != "__pycache__":
                    init.write_text("", encoding="utf-8")
    return written


def _protoc(args) -> None:
    # In a subprocess: grpc_tools.protoc.main keeps state between calls in one process.
    command = [sys.executable, "-m", "grpc_tools.protoc", *args]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"protoc failed ({' '.join(command)}):\n{result.stderr}")


if __name__ == "__main__":
    for path in build():
        print(path.relative_to(ROOT))
