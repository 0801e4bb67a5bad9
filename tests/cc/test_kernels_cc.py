"""Builds the C++ kernel test harness (tests/cc/*.cc) against the runtime library and runs it;
fails with the harness output if any case fails.

The harness links the built libtfpopef_runtime.so, so it tests the shipped -O3 kernels on every
SIMD path (the cases switch paths through the environment) and compiles only the test files.
Include paths come from the Python packages (nlohmann_json, scipy_openblas32). A library older
than a runtime source fails the build with the command that rebuilds it. Objects are compiled
two at a time (the CI machine has 2 cores) at -O1 with a precompiled nlohmann/json header, and
the cases run as two processes, each every second case (`--shard=I/N`).
"""

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
RUNTIME_SOURCES = REPO / "tf_popef_op" / "runtime" / "cc"
RUNTIME_LIB_DIR = REPO / "tf_popef_op" / "lib"
RUNTIME_LIB = RUNTIME_LIB_DIR / "libtfpopef_runtime.so"
HARNESS = pathlib.Path(__file__).resolve().parent / "kernel_tests.cc"
CXX = os.environ.get("CXX", "g++")
JOBS = 2
BUILD_TIMEOUT_S = 300
RUN_TIMEOUT_S = 300


def _flags():
    import nlohmann_json
    import scipy_openblas32

    includes = [str(REPO), str(nlohmann_json.get_include()), scipy_openblas32.get_include_dir()]
    compile_flags = ["-std=c++17", "-O1", "-g0", "-Wall", "-Wextra", "-pthread"]
    compile_flags += [f"-I{d}" for d in includes]
    link_flags = [f"-L{RUNTIME_LIB_DIR}", f"-Wl,-rpath,{RUNTIME_LIB_DIR}", "-ltfpopef_runtime", "-pthread"]
    return compile_flags, link_flags


# Most test files include nlohmann/json.hpp (through kernel.h), which is most of their compile
# time; it is precompiled once.
PCH_HEADERS = ["nlohmann/json.hpp", "functional", "memory", "string", "vector"]


def _precompiled_header(build_dir, compile_flags):
    """Builds build_dir/pch.h.gch; returns the flags that make every compile use it."""
    header = build_dir / "pch.h"
    header.write_text("".join(f"#include <{h}>\n" for h in PCH_HEADERS))
    cmd = [CXX, *compile_flags, "-x", "c++-header", str(header), "-o", str(build_dir / "pch.h.gch")]
    result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            timeout=BUILD_TIMEOUT_S)
    if result.returncode != 0:
        pytest.fail("precompiling the common headers failed:\n" + result.stdout, pytrace=False)
    return [f"-I{build_dir}", "-include", "pch.h", "-Winvalid-pch"]


def _compile_all(sources, build_dir, compile_flags):
    """Compiles `sources` to objects, JOBS processes at a time; returns the object paths."""
    pending = list(sources)
    running = []
    objects = []
    errors = []
    while pending or running:
        while pending and len(running) < JOBS:
            src = pending.pop(0)
            obj = build_dir / (src.stem + ".o")
            cmd = [CXX, *compile_flags, "-c", str(src), "-o", str(obj)]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            running.append((src, obj, proc, time.monotonic()))
            objects.append(obj)
        for item in list(running):
            src, obj, proc, started = item
            if proc.poll() is None:
                if time.monotonic() - started > BUILD_TIMEOUT_S:
                    proc.kill()
                    errors.append(f"{src}: compile timed out after {BUILD_TIMEOUT_S}s")
                    running.remove(item)
                continue
            output = proc.stdout.read()
            if proc.returncode != 0:
                errors.append(f"{src}:\n{output}")
            running.remove(item)
        time.sleep(0.05)
    if errors:
        pytest.fail("compiling the kernel tests failed:\n" + "\n".join(errors), pytrace=False)
    return objects


@pytest.fixture(scope="module")
def harness_binary():
    if shutil.which(CXX) is None:
        pytest.fail(f"C++ compiler '{CXX}' not found; the kernel tests need g++ (C++17)", pytrace=False)
    # A private temp dir, not tmp_path_factory: concurrent pytest sessions prune each other's
    # old basetemp dirs, which could delete this build midway.
    with tempfile.TemporaryDirectory(prefix="tfpopef_kernel_tests_") as tmp:
        yield _build(pathlib.Path(tmp))


def _check_runtime_library():
    """Fails unless the runtime library exists and is newer than every runtime source."""
    rebuild = "build it with `make build` (or `python setup.py build_ext --inplace`)"
    if not RUNTIME_LIB.exists():
        pytest.fail(f"{RUNTIME_LIB} not found: {rebuild}", pytrace=False)
    built = RUNTIME_LIB.stat().st_mtime
    stale = [p for p in RUNTIME_SOURCES.rglob("*") if p.suffix in (".cc", ".h", ".inc") and p.stat().st_mtime > built]
    if stale:
        names = ", ".join(str(p.relative_to(REPO)) for p in sorted(stale)[:3])
        pytest.fail(f"{RUNTIME_LIB.name} is older than {names}: {rebuild}", pytrace=False)


def _build(build_dir):
    _check_runtime_library()
    compile_flags, link_flags = _flags()
    # kernel_tests.cc (with main) first: the slowest file first balances the 2 jobs; more test
    # files (*_kernel_tests.cc) register their cases with the same harness.
    sources = [HARNESS] + sorted(HARNESS.parent.glob("*_kernel_tests.cc"))
    compile_flags += _precompiled_header(build_dir, compile_flags)
    objects = _compile_all(sources, build_dir, compile_flags)
    binary = build_dir / "kernel_tests"
    link = subprocess.run([CXX, *map(str, objects), "-o", str(binary), *link_flags],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=BUILD_TIMEOUT_S)
    if link.returncode != 0:
        pytest.fail("linking the kernel tests failed:\n" + link.stdout, pytrace=False)
    return binary


def _run_shards(binary, shards=JOBS):
    """Runs the harness as `shards` processes at once (--shard=I/N); returns each one's
    (exit code, output)."""
    procs = [subprocess.Popen([str(binary), f"--shard={i}/{shards}"], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for i in range(shards)]
    results = []
    for proc in procs:
        try:
            out, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            out += f"\n(timed out after {RUN_TIMEOUT_S}s)"
        results.append((proc.returncode, out))
    return results


def test_kernel_cases_pass(harness_binary):
    # The cases are independent; two processes halve the wall time on the 2-core CI machine.
    results = _run_shards(harness_binary)
    summaries = []
    for code, out in results:
        summary = out.strip().splitlines()[-1] if out.strip() else "(no output)"
        summaries.append(summary)
        if code != 0:
            failed = [line for line in out.splitlines() if not line.startswith("[  OK  ]")]
            pytest.fail(f"kernel test harness exited with {code}: {summary}\n" + "\n".join(failed),
                        pytrace=False)
        assert " 0 failed" in summary, out
    ran = sum(int(s.split()[0]) for s in summaries)
    sys.stdout.write(f"{ran} cases in {len(results)} shards: " + "; ".join(summaries) + "\n")


def test_shards_cover_every_case_once(harness_binary):
    """The shards of a filtered run partition its cases: no case is lost or run twice."""
    def names(*args):
        out = subprocess.run([str(harness_binary), "Errors", *args], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=RUN_TIMEOUT_S).stdout
        return [line.split("] ", 1)[1] for line in out.splitlines() if line.startswith("[")]
    whole = names()
    parts = names("--shard=0/3") + names("--shard=1/3") + names("--shard=2/3")
    assert len(whole) >= 3 and sorted(parts) == sorted(whole), (whole, parts)
    bad = subprocess.run([str(harness_binary), "--shard=2/2"], stdout=subprocess.PIPE, text=True,
                         timeout=RUN_TIMEOUT_S)
    assert bad.returncode == 2 and "expected --shard=I/N" in bad.stdout, bad.stdout


def test_error_messages_name_op_and_node(harness_binary):
    """-v prints every expected preparation error; each must carry the op/node prefix."""
    result = subprocess.run([str(harness_binary), "Errors", "-v"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=RUN_TIMEOUT_S)
    assert result.returncode == 0, result.stdout
    messages = [line.strip() for line in result.stdout.splitlines() if line.startswith("         ")]
    assert len(messages) >= 30, result.stdout
    for line in messages:
        assert "(node 'test_node')" in line, line
        assert line.split(":", 1)[0] in {"INVALID_ARGUMENT", "UNIMPLEMENTED"}, line
