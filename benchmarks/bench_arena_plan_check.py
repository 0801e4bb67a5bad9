"""What the arena plan check costs when an executable is loaded: microseconds per check next to
the whole Executable parse (kernels prepared, hash), for the model zoo's networks compiled at
batch 1 (or for the PopEF/ONNX files given).

    .venv/bin/python benchmarks/bench_arena_plan_check.py [--models resnet50 densenet121 ...] [FILE ...]

The first run exports the zoo models with tf2onnx into benchmarks/.cache (minutes); the timing
itself takes seconds. A C++ program (benchmarks/cc/arena_plan_check_timing.cc) linked to the
runtime library does the timing, so Python is not measured.
"""
import argparse
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [_REPO, os.path.join(_REPO, "benchmarks"), os.path.join(_REPO, "tests", "models")]

import nlohmann_json  # noqa: E402
import scipy_openblas32  # noqa: E402

import tf_popef_op  # noqa: E402
from compiler import Compiler, CompilerOptions  # noqa: E402
from model_zoo import FULL, cached_onnx_path  # noqa: E402


def build_timing_program(binary: str) -> str:
    lib = os.path.join(os.path.dirname(os.path.abspath(tf_popef_op.__file__)), "lib")
    subprocess.run(["g++", "-std=c++17", "-O2", "-pthread", f"-I{_REPO}", f"-I{nlohmann_json.get_include()}",
                    f"-I{scipy_openblas32.get_include_dir()}",
                    os.path.join(_REPO, "benchmarks", "cc", "arena_plan_check_timing.cc"), "-o", binary,
                    f"-L{lib}", "-ltfpopef_runtime", f"-Wl,-rpath,{lib}"], check=True, timeout=600)
    return binary


def popef_path(path: str, folder: str) -> str:
    if not path.endswith(".onnx"):
        return path
    out = os.path.join(folder, os.path.basename(path)[:-5] + ".popef")
    with open(path, "rb") as f:
        executable = Compiler.compile(f.read(), options=CompilerOptions(batch_size=1))
    with open(out, "wb") as f:
        f.write(executable.to_bytes())
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="*", default=["resnet50", "densenet121", "efficientnet_b0", "inception_v3"])
    p.add_argument("files", nargs="*", help="PopEF or ONNX files instead of the zoo models")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        sources = args.files or [cached_onnx_path(FULL[name]) for name in args.models]
        files = [popef_path(s, folder) for s in sources]
        binary = build_timing_program(os.path.join(folder, "arena_plan_check_timing"))
        out = subprocess.run([binary] + files, capture_output=True, text=True, check=True).stdout
    print("| model | tensors | steps | arena plan check (µs) | whole Executable parse (µs) | share |")
    print("|---|---|---|---|---|---|")
    for line in out.splitlines():
        path, tensors, steps, check, parse = line.split("\t")
        print(f"| {os.path.basename(path)} | {tensors} | {steps} | {float(check):.1f} | {float(parse):.0f} | "
              f"{float(check) / float(parse):.2%} |")


if __name__ == "__main__":
    main()
