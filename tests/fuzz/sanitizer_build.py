"""Builds the C++ runtime with AddressSanitizer, UBSan and libFuzzer edge coverage, for fuzzing.

    python tests/fuzz/sanitizer_build.py [--out build/fuzz-asan]

The output folder is a Python import root that shadows the normal build:

    OUT/tf_popef_op/lib/libtfpopef_runtime.so     the runtime library, sanitized and instrumented
    OUT/tf_popef_op/runtime/_runtime*.so          its pybind11 module, likewise
    OUT/tf_popef_op/...                           symbolic links to the package's Python files
    OUT/asan_with_fuzzer.so                       clang's ASan runtime with libFuzzer linked in

Put OUT first on sys.path and LD_PRELOAD asan_with_fuzzer.so (run_fuzz.py --sanitizer-build does
both). The library is compiled by clang with `-fsanitize=fuzzer-no-link`, so its edges and
comparisons feed libFuzzer; the preload has to carry libFuzzer itself, because ASan's weak
coverage hooks, loaded first, would otherwise take the calls that libFuzzer must see (atheris,
native_extension_fuzzing.md). atheris's wheel ships no such merged library, so it is made here
from the clang installation as atheris's source build makes it: libFuzzer plus ASan (without its
preinit object, which must not run in a preloaded library) plus ASan's C++ part (operator
new/delete, UBSan's C++ type checks).
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PACKAGE = os.path.join(REPO, "tf_popef_op")
DEFAULT_OUT = os.path.join(REPO, "build", "fuzz-asan")
PRELOAD_NAME = "asan_with_fuzzer.so"
SANITIZER_FLAGS = ("-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined "
                   "-fno-omit-frame-pointer -O1 -g")
# detect_leaks=0: CPython keeps its allocations at exit. allocator_may_return_null=0 (the default)
# keeps an absurd allocation a report, not a bad_alloc the runtime might swallow.
ASAN_OPTIONS = "detect_leaks=0:abort_on_error=1:symbolize=1:handle_abort=1:detect_stack_use_after_return=0"
UBSAN_OPTIONS = "print_stacktrace=1:halt_on_error=1"
CLANG = os.environ.get("TFPOPEF_FUZZ_CLANG", "clang++")


class BuildError(RuntimeError):
    pass


def _clang() -> str:
    path = shutil.which(CLANG)
    if path is None:
        raise BuildError(f"'{CLANG}' not found: the sanitizer build needs clang with compiler-rt "
                         "(Debian: apt-get install clang libclang-rt-14-dev)")
    return path


def _runtime_archive(clang: str, name: str) -> str:
    path = subprocess.run([clang, f"-print-file-name=libclang_rt.{name}-x86_64.a"], check=True,
                          capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(path) or not os.path.exists(path):
        raise BuildError(f"{clang} has no libclang_rt.{name}-x86_64.a (Debian: apt-get install libclang-rt-14-dev)")
    return path


def build_preload(clang: str, out: str) -> str:
    """OUT/asan_with_fuzzer.so: libFuzzer + ASan (+ its C++ part) in one preloadable library."""
    target = os.path.join(out, PRELOAD_NAME)
    fuzzer, asan, asan_cxx = (_runtime_archive(clang, n) for n in ("fuzzer_no_main", "asan", "asan_cxx"))
    if os.path.exists(target) and os.path.getmtime(target) >= max(map(os.path.getmtime, (fuzzer, asan, asan_cxx))):
        return target
    with tempfile.TemporaryDirectory() as tmp:
        stripped = os.path.join(tmp, "asan.a")
        shutil.copy(asan, stripped)
        subprocess.run(["ar", "d", stripped, "asan_preinit.cpp.o", "asan_preinit.cc.o"], check=True)
        subprocess.run([clang, "-shared", "-o", target, "-Wl,--whole-archive", fuzzer, stripped, asan_cxx,
                        "-Wl,--no-whole-archive", "-lstdc++", "-lpthread", "-ldl", "-lrt", "-lm"], check=True)
    return target


def _cmake() -> str:
    try:
        import cmake
        return os.path.join(cmake.CMAKE_BIN_DIR, "cmake")
    except ImportError:
        return "cmake"


def build_runtime(clang: str, out: str, jobs: int) -> None:
    """OUT/tf_popef_op/{lib,runtime}: the CMake project built by clang with SANITIZER_FLAGS."""
    package = os.path.join(out, "tf_popef_op")
    build_dir = os.path.join(out, "cmake")
    args = ["-G", "Ninja", "-DCMAKE_BUILD_TYPE=Debug",  # -g, and assert() stays on
            f"-DCMAKE_CXX_COMPILER={clang}", f"-DPython_EXECUTABLE={sys.executable}",
            f"-DTFPOPEF_SANITIZER_FLAGS={SANITIZER_FLAGS}", f"-DTFPOPEF_PACKAGE_DIR={package}"]
    try:
        import ninja
        args.append(f"-DCMAKE_MAKE_PROGRAM={os.path.join(ninja.BIN_DIR, 'ninja')}")
    except ImportError:
        pass
    cmake = _cmake()
    subprocess.run([cmake, "-S", PACKAGE, "-B", build_dir, *args], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([cmake, "--build", build_dir, "-j", str(jobs)], check=True)
    _link_python_sources(PACKAGE, package)


def _link_python_sources(source: str, target: str) -> None:
    """Mirror the package's Python files into TARGET as symbolic links, leaving the built
    libraries (lib/, *.so) to the sanitizer build."""
    os.makedirs(target, exist_ok=True)
    for name in os.listdir(source):
        if name in ("lib", "__pycache__") or name.endswith(".so"):
            continue
        src, dst = os.path.join(source, name), os.path.join(target, name)
        if os.path.isdir(src) and not os.path.islink(src) and name == "runtime":
            _link_python_sources(src, dst)
        elif not os.path.lexists(dst):
            os.symlink(src, dst)


def build(out: str = DEFAULT_OUT, jobs: int = 2) -> str:
    """Builds everything into OUT; returns the preload library's path."""
    clang = _clang()
    os.makedirs(out, exist_ok=True)
    preload = build_preload(clang, out)
    build_runtime(clang, out, jobs)
    return preload


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "2")))
    args = parser.parse_args(argv)
    try:
        print(build(os.path.abspath(args.out), args.jobs))
    except BuildError as e:
        print(f"sanitizer build: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
