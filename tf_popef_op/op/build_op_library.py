"""Builds the PopefExecute op library (tf_popef_op/lib/_popef_ops.so) with g++ against the
installed TensorFlow, using ``tf.sysconfig`` compile and link flags. Run by setup.py's
build_ext after the CMake runtime build; the Bazel build (tf_popef_op/op/BUILD) is the other
way to build the same sources.

Incremental: each source compiles to an object with a g++ dependency file, and is recompiled
only when it, a header it includes or the compile command changed; the library is relinked
only when an object or the link command changed. Both run at most `jobs` compilers at once.

The library links the runtime library next to it (rpath $ORIGIN), so the op and
tf_popef_op.runtime share one DeviceManager in a process.
"""
import glob
import os
import shlex
import subprocess
import sys
from pathlib import Path

OP_DIR = Path(__file__).resolve().parent
REPO_ROOT = OP_DIR.parent.parent
LIBRARY_NAME = "_popef_ops.so"


def tensorflow_flags(cache_dir: Path):
    """(compile flags, link flags) of the TensorFlow installed for this interpreter, from
    tf.sysconfig; None if TensorFlow is absent. Importing TensorFlow takes seconds, so the
    flags are cached in cache_dir, keyed by the installed package's location and timestamp."""
    import importlib.util
    import json
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or not spec.origin:
        return None
    key = f"{spec.origin} {os.path.getmtime(spec.origin)}"
    cache = cache_dir / "tf_flags.json"
    if cache.exists():
        cached = json.loads(cache.read_text())
        if cached.get("key") == key:
            return cached["compile"], cached["link"]
    code = ("import tensorflow as tf, json; "
            "print(json.dumps([tf.sysconfig.get_compile_flags(), tf.sysconfig.get_link_flags()]))")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"cannot read TensorFlow's build flags:\n{out.stderr[-2000:]}")
    compile_flags, link_flags = json.loads(out.stdout.strip().splitlines()[-1])
    cache_dir.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps({"key": key, "compile": compile_flags, "link": link_flags}))
    return compile_flags, link_flags


def _stale(target: Path, deps, command: str, stamp: Path) -> bool:
    if not target.exists() or not stamp.exists() or stamp.read_text() != command:
        return True
    mtime = target.stat().st_mtime
    return any(not os.path.exists(d) or os.path.getmtime(d) > mtime for d in deps)


def _depfile_deps(depfile: Path):
    if not depfile.exists():
        return None
    text = depfile.read_text().replace("\\\n", " ")
    _, _, deps = text.partition(":")
    return shlex.split(deps)


def build(package_dir: Path, build_dir: Path, nlohmann_include: str, jobs: int = 2, cxx: str = "g++"):
    """Builds package_dir/lib/_popef_ops.so and returns its path; the runtime library
    (package_dir/lib/libtfpopef_runtime.so) must exist. Without TensorFlow (e.g. an isolated
    wheel build) there is nothing to build the op against: says so and returns None; the
    runtime works without it, and tf_popef_op.load_op_library() explains how to build it."""
    flags = tensorflow_flags(build_dir)
    if flags is None:
        print(f"[popef-op] WARNING: TensorFlow is not installed for {sys.executable}: the PopefExecute op "
              f"is not built (pip install -r requirements.txt, then build again)", flush=True)
        return None
    compile_flags, link_flags = flags
    # TF's headers as system headers: their warnings are not ours to fix.
    compile_flags = ["-isystem" + f[2:] if f.startswith("-I") else f for f in compile_flags]
    lib_dir = package_dir / "lib"
    runtime_lib = lib_dir / "libtfpopef_runtime.so"
    if not runtime_lib.exists():
        raise RuntimeError(f"{runtime_lib} is missing: the runtime must be built before the op")
    build_dir.mkdir(parents=True, exist_ok=True)
    common = ["-std=c++17", "-O2", "-fPIC", "-Wall", "-Wno-deprecated-declarations",
              f"-I{REPO_ROOT}", f"-I{nlohmann_include}"] + compile_flags

    sources = sorted(glob.glob(str(OP_DIR / "cc" / "ops" / "*.cc")) + glob.glob(str(OP_DIR / "cc" / "kernels" / "*.cc")))
    objects, pending = [], []
    for src in sources:
        rel = os.path.relpath(src, OP_DIR).replace(os.sep, "_")
        obj = build_dir / (rel[:-3] + ".o")
        dep = build_dir / (rel[:-3] + ".d")
        cmd = [cxx] + common + ["-MMD", "-MF", str(dep), "-c", src, "-o", str(obj)]
        stamp = build_dir / (rel[:-3] + ".cmd")
        deps = _depfile_deps(dep)
        if deps is None or _stale(obj, deps + [src], " ".join(cmd), stamp):
            pending.append((cmd, stamp))
        objects.append(obj)
    running = []
    for cmd, stamp in pending:
        print(f"[popef-op] compiling {cmd[cmd.index('-c') + 1]}", flush=True)
        running.append((subprocess.Popen(cmd), cmd, stamp))
        if len(running) >= jobs:
            _wait(running.pop(0))
    for job in running:
        _wait(job)

    target = lib_dir / LIBRARY_NAME
    link = [cxx, "-shared", "-o", str(target)] + [str(o) for o in objects] + [
        f"-L{lib_dir}", "-l:libtfpopef_runtime.so", "-Wl,-rpath,$ORIGIN"] + link_flags
    link_stamp = build_dir / "link.cmd"
    if _stale(target, [str(o) for o in objects], " ".join(link), link_stamp):
        print(f"[popef-op] linking {target}", flush=True)
        subprocess.check_call(link)
        link_stamp.write_text(" ".join(link))
    return target


def _wait(job):
    proc, cmd, stamp = job
    if proc.wait() != 0:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    stamp.write_text(" ".join(cmd))
