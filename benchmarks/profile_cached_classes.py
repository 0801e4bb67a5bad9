"""Our per-op-class profile (op_profiles.modelrunner_by_op) of a cached PopEF, for comparing two
runtimes on the same PopEF: run it from each checkout in turn, e.g.

    for i in 1 2 3; do for c in /work/main .; do (cd $c && PYTHONPATH=$PWD \\
        .venv/bin/python <this checkout>/benchmarks/profile_cached_classes.py efficientnet_b0 1 --iters 20); done; done

MODEL is the export name in benchmarks/.cache (the part before the first '-'); the PopEF read is
<export>-b<BATCH>-<precision>.popef there, as bench_models.py --parts compile wrote it. Prints
the profiled run and each class's ms per run."""
import argparse
import copy
import glob
import os
import sys

import numpy as np
import onnx

# The checkout being measured is the working directory: its runtime, compiler and op classes.
sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
import op_profiles  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("batch", type=int)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "fp16"])
    args = parser.parse_args()
    from compiler import Executable
    from compiler.converter import Converter
    from tf_popef_op.runtime import ModelRunner
    cache = os.path.join("benchmarks", ".cache")
    exports = sorted(glob.glob(os.path.join(cache, f"{args.model}-*.onnx")))
    if not exports:
        raise SystemExit(f"no ONNX export of {args.model} in {cache}")
    converted = Converter(batch_size=args.batch, precision="fp32").convert(copy.deepcopy(onnx.load(exports[0])))
    executable = Executable.load(f"{exports[0][:-len('.onnx')]}-b{args.batch}-{args.precision}.popef")
    (anchor,) = ModelRunner(executable).get_execute_inputs()
    x = np.random.default_rng(0).standard_normal(anchor.shape).astype(np.float32)
    profile = op_profiles.modelrunner_by_op(executable, x, args.iters, converted)
    print(f"  run {profile['run_us'] / 1000:.3f} ms")
    for cls, us in profile["by_class_us"].items():
        print(f"  {cls:40s} {us / 1000:8.3f} ms")


if __name__ == "__main__":
    main()
