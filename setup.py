"""tf-popef: PopRT-style compiler (ONNX -> PopEF), IPU emulator runtime and TF Serving glue.

The runtime's C++ library and its Python extension are built by CMake
(tf_popef_op/CMakeLists.txt) from the custom build_ext below:
- in place (``pip install -e . --no-build-isolation`` or ``python setup.py build_ext --inplace``):
  outputs go into the source tree (tf_popef_op/lib, tf_popef_op/runtime) and the CMake build
  directory is build/cmake-inplace, so a rebuild only recompiles what changed;
- otherwise (wheel / normal install): outputs go into the build lib, CMake dir build/cmake-wheel.
The same build_ext first compiles the upstream .proto files in third_party/proto into
serving/protos (serving/protos/build_protos.py), and then builds the native KServe v2 gRPC
front end (serving/kserve_native/CMakeLists.txt, against the runtime library just built and
the system's gRPC C++: Debian's NATIVE_GRPC_PACKAGES, which `make build` installs).
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
NATIVE_GRPC_PACKAGES = "libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc pkg-config"


def _version() -> str:
    scope = {}
    exec((ROOT / "compiler" / "version.py").read_text(), scope)
    return scope["VERSION"]


class CMakeExtension(Extension):
    """An extension built by a CMake project instead of by setuptools."""

    def __init__(self, name: str, cmake_dir: Path):
        super().__init__(name, sources=[])
        self.cmake_dir = cmake_dir


class CMakeBuild(build_ext):
    def run(self):
        # Replaces setuptools' build-then-copy: CMake writes straight to the final place.
        inplace = bool(self.inplace or getattr(self, "editable_mode", False))
        self._build_protos(inplace)
        for ext in self.extensions:
            self._build_cmake(ext, inplace)

    def _build_protos(self, inplace: bool):
        # Message classes and gRPC stubs from the upstream .proto files in third_party/proto.
        import runpy
        out_dir = (ROOT if inplace else Path(self.build_lib).resolve()) / "serving" / "protos"
        runpy.run_path(str(ROOT / "serving" / "protos" / "build_protos.py"))["build"](out_dir)

    def _build_cmake(self, ext: CMakeExtension, inplace: bool):
        # Python-side dependencies of the build, resolved in the interpreter running setup.py.
        import nlohmann_json
        import pybind11
        import scipy_openblas32

        out_root = ROOT if inplace else Path(self.build_lib).resolve()
        package_dir = out_root / "tf_popef_op"
        # TFPOPEF_CMAKE_BUILD_DIR: a separate build tree, so concurrent builds of one checkout
        # (several developers' jobs) never share ninja's state.
        build_dir = Path(os.environ.get("TFPOPEF_CMAKE_BUILD_DIR") or ROOT / "build" / (
            "cmake-inplace" if inplace else "cmake-wheel")).resolve()
        args = [
            "-G", "Ninja",
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-Dpybind11_DIR={pybind11.get_cmake_dir()}",
            f"-DNLOHMANN_JSON_INCLUDE_DIR={nlohmann_json.get_include()}",
        ]
        ninja = _tool_dir("ninja")
        if ninja:
            args.append(f"-DCMAKE_MAKE_PROGRAM={os.path.join(ninja, 'ninja')}")
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        if ext.name.startswith("serving."):
            missing = [tool for tool in ("protoc", "grpc_cpp_plugin", "pkg-config")
                       if shutil.which(tool) is None]
            if missing:
                raise RuntimeError(f"building {ext.name} needs gRPC C++ and protoc ({', '.join(missing)} "
                                   f"not found): apt-get install {NATIVE_GRPC_PACKAGES}")
            runtime = sorted((package_dir / "lib").glob("libtfpopef_runtime.so"))
            self._cmake(ext.cmake_dir, build_dir.parent / (build_dir.name + "-kserve-native"), args + [
                f"-DTFPOPEF_OUTPUT_DIR={out_root / 'serving' / 'kserve_native'}",
                f"-DTFPOPEF_RUNTIME_LIBRARY={runtime[0] if runtime else ''}"], jobs)
            return
        self._cmake(ext.cmake_dir, build_dir, args + [
            f"-DSCIPY_OPENBLAS_INCLUDE_DIR={scipy_openblas32.get_include_dir()}",
            f"-DSCIPY_OPENBLAS_LIB_DIR={scipy_openblas32.get_lib_dir()}",
            f"-DTFPOPEF_PACKAGE_DIR={package_dir}",
        ], jobs)
        self._build_tf_op(package_dir, build_dir.parent / (build_dir.name.replace("cmake", "op")), int(jobs))

    @staticmethod
    def _cmake(source_dir: Path, build_dir: Path, args, jobs: str):
        build_dir.mkdir(parents=True, exist_ok=True)
        cmake = os.path.join(_tool_dir("cmake") or "", "cmake")
        # Configure only when the options changed: keeps no-op rebuilds to a second.
        stamp = build_dir / "tfpopef-configure-args.txt"
        wanted = "\n".join([str(source_dir)] + args)
        if not (build_dir / "CMakeCache.txt").exists() or not stamp.exists() or stamp.read_text() != wanted:
            subprocess.check_call([cmake, "-S", str(source_dir), "-B", str(build_dir)] + args)
            stamp.write_text(wanted)
        subprocess.check_call([cmake, "--build", str(build_dir), "-j", jobs])

    def _build_tf_op(self, package_dir: Path, build_dir: Path, jobs: int):
        # The PopefExecute TF op (tf_popef_op/op), built with g++ and tf.sysconfig flags against
        # the installed TensorFlow, linked to the runtime library just built.
        import runpy

        import nlohmann_json
        op_build = runpy.run_path(str(ROOT / "tf_popef_op" / "op" / "build_op_library.py"))
        op_build["build"](package_dir, build_dir, nlohmann_json.get_include(), jobs=min(jobs, 2))

    def get_outputs(self):
        # The extension module's path, as setuptools computes it (wheel RECORD, editable map).
        return [self.get_ext_fullpath(ext.name) for ext in self.extensions]


def _tool_dir(name: str):
    """bin dir of the pip-installed cmake / ninja, if any (else rely on PATH)."""
    try:
        module = __import__(name)
    except ImportError:
        return None
    return getattr(module, "BIN_DIR", None) or getattr(module, "CMAKE_BIN_DIR", None)


setup(
    name="tf-popef",
    version=_version(),
    description="PopRT-style ONNX -> PopEF compiler, IPU emulator runtime and TF Serving integration",
    python_requires=">=3.9",
    packages=find_packages(include=["tf_popef_op", "tf_popef_op.*", "compiler", "compiler.*", "popef", "popef.*",
                                    "serving", "serving.*"]),
    # In this order: the native front end links the runtime library.
    ext_modules=[CMakeExtension("tf_popef_op.runtime._runtime", ROOT / "tf_popef_op"),
                 CMakeExtension("serving.kserve_native._kserve_native", ROOT / "serving" / "kserve_native")],
    cmdclass={"build_ext": CMakeBuild},
    install_requires=[
        "numpy==2.4.6",
        "onnx==1.23.2",
        "pyyaml==6.0.3",
        "scipy-openblas32==0.3.34.481.3",
    ],
    entry_points={
        "console_scripts": [
            "popef-compile = compiler.cli:main",
            "popef_dump = popef.dump:main",
            "popef-export = serving.export:main",
            "popef-model-server = serving.model_server.server:main",
            "popef-client = serving.client.cli:main",
        ],
    },
    zip_safe=False,
)
