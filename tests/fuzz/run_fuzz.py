"""Runs one coverage-guided fuzz target with atheris (libFuzzer for Python).

    python tests/fuzz/run_fuzz.py TARGET [--seconds 60] [--workdir build/fuzz] [-- libFuzzer flags]
    python tests/fuzz/run_fuzz.py TARGET --replay FILE...   # run files once, no fuzzing
    python tests/fuzz/run_fuzz.py runtime_popef --sanitizer-build build/fuzz-asan ...

Targets live in tests/fuzz/targets (each has `check(data)` and `seed_inputs()`). The corpus
starts from the seeds and the regression corpus tests/fuzz/corpus/TARGET; new coverage is kept
in WORKDIR/TARGET/corpus and findings are written to WORKDIR/TARGET/findings/. Python code of
popef, compiler and tf_popef_op is coverage-instrumented; the mutators are structure-aware
(valid CRCs and JSON for PopEF, parseable protobufs for ONNX, parseable YAML for configs), with
libFuzzer's byte mutations mixed in.

--sanitizer-build DIR runs the C++ runtime of DIR (tests/fuzz/sanitizer_build.py: ASan, UBSan and
libFuzzer edge coverage) instead of the in-place build: the script re-executes itself with DIR's
preload library and sanitizer options, and DIR goes first on sys.path.
"""
import argparse
import hashlib
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
for path in (REPO, HERE):
    if path not in sys.path:
        sys.path.insert(0, path)

TARGETS = ("runtime_popef", "python_popef", "compiler_onnx", "compiler_fusion_yaml",
           # the server's request decoders
           "serving_rest_json", "serving_kserve_rest", "serving_predict_proto",
           "serving_kserve_grpc")
# Replayed in a subprocess by test_fuzz_serving_corpus.py, the rest in-process by
# test_fuzz_regression_corpus.py: the server's generated `inference` protos clash with
# tritonclient's, which other test modules import into the test process.
SUBPROCESS_REPLAY = ("serving_kserve_grpc",)
IN_PROCESS_REPLAY = tuple(t for t in TARGETS if t not in SUBPROCESS_REPLAY)
REGRESSION_CORPUS = os.path.join(HERE, "corpus")
# The targets that call the C++ runtime, the ones worth running with --sanitizer-build.
NATIVE_TARGETS = ("runtime_popef",)


def use_sanitizer_build(folder: str) -> None:
    """Re-executes this process with FOLDER's ASan+libFuzzer preload (once), and puts FOLDER
    first on sys.path."""
    import sanitizer_build
    folder = os.path.abspath(folder)
    preload = os.path.join(folder, sanitizer_build.PRELOAD_NAME)
    if not os.path.exists(preload):
        sys.exit(f"{preload} missing: build it with tests/fuzz/sanitizer_build.py --out {folder}")
    if os.environ.get("LD_PRELOAD") != preload:
        env = dict(os.environ, LD_PRELOAD=preload,
                   ASAN_OPTIONS=os.environ.get("ASAN_OPTIONS", sanitizer_build.ASAN_OPTIONS),
                   UBSAN_OPTIONS=os.environ.get("UBSAN_OPTIONS", sanitizer_build.UBSAN_OPTIONS))
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), *sys.argv[1:]], env)
    sys.path.insert(0, folder)


def check_sanitizer_build(folder: str) -> None:
    """Fails unless the runtime the target imported is FOLDER's."""
    runtime = sys.modules.get("tf_popef_op.runtime._runtime")
    if runtime is None or not runtime.__file__.startswith(os.path.abspath(folder) + os.sep):
        sys.exit(f"the target did not load the sanitized runtime of {folder}: {runtime}")


def load_target(name: str):
    """The target module and its structure-aware mutation function."""
    import importlib
    module = importlib.import_module(f"targets.{name}")
    if name in ("runtime_popef", "python_popef"):
        from popef_mutator import mutate_popef as mutate
    elif name == "compiler_onnx":
        from onnx_mutator import mutate_onnx as mutate
    elif name == "compiler_fusion_yaml":
        from yaml_mutator import mutate_yaml as mutate
    elif name == "serving_rest_json":
        from json_mutator import mutate_json as mutate
    elif name == "serving_kserve_rest":
        from json_mutator import mutate_request_json as mutate
    else:   # the protobuf decoders: libFuzzer's own byte mutations
        def mutate(data, rng):
            return None
    return module, mutate


def regression_files(name: str):
    folder = os.path.join(REGRESSION_CORPUS, name)
    if not os.path.isdir(folder):
        return []
    return sorted(os.path.join(folder, f) for f in os.listdir(folder) if not f.startswith("."))


def _prepare_corpus(module, name: str, workdir: str) -> str:
    corpus = os.path.join(workdir, name, "corpus")
    os.makedirs(corpus, exist_ok=True)
    os.makedirs(os.path.join(workdir, name, "findings"), exist_ok=True)
    for data in module.seed_inputs():
        with open(os.path.join(corpus, "seed-" + hashlib.sha1(data).hexdigest()), "wb") as f:
            f.write(data)
    return corpus


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("target", choices=TARGETS)
    parser.add_argument("--seconds", type=int, default=60, help="fuzzing time (libFuzzer -max_total_time)")
    parser.add_argument("--workdir", default=os.path.join(REPO, "build", "fuzz"))
    parser.add_argument("--timeout", type=int, default=30, help="seconds one input may take before it is a hang")
    parser.add_argument("--rss_limit_mb", type=int, default=3072)
    parser.add_argument("--replay", nargs="+", metavar="FILE", help="run these inputs once and exit")
    parser.add_argument("--sanitizer-build", metavar="DIR",
                        help="run the C++ runtime built by tests/fuzz/sanitizer_build.py into DIR")
    args, libfuzzer_args = parser.parse_known_args(argv)
    if args.sanitizer_build:
        if args.target not in NATIVE_TARGETS:
            parser.error(f"--sanitizer-build: {args.target} does not call the C++ runtime")
        use_sanitizer_build(args.sanitizer_build)
    import atheris  # requirements-fuzz.txt; replaying the corpus (make test) does not need it

    if args.replay:
        module, _ = load_target(args.target)
    else:
        with atheris.instrument_imports(include=["popef", "compiler", "tf_popef_op", "serving", "targets"]):
            module, mutate = load_target(args.target)
    if args.sanitizer_build:
        check_sanitizer_build(args.sanitizer_build)
    if args.replay:
        for path in args.replay:
            with open(path, "rb") as f:
                module.check(f.read())
            print(f"{path}: ok")
        return 0

    def custom_mutator(data: bytes, max_size: int, seed: int) -> bytes:
        rng = random.Random(seed)
        try:
            out = None if rng.random() < 0.1 else mutate(data, rng)
        except (UnicodeError, ValueError, TypeError):  # a byte-mutated input the structured mutator cannot edit
            out = None
        if out is None or len(out) > max_size:
            out = atheris.Mutate(data, max_size)
        return out

    corpus = _prepare_corpus(module, args.target, args.workdir)
    findings = os.path.join(args.workdir, args.target, "findings") + os.sep
    regression = os.path.join(REGRESSION_CORPUS, args.target)
    flags = [sys.argv[0], f"-max_total_time={args.seconds}", f"-timeout={args.timeout}",
             f"-rss_limit_mb={args.rss_limit_mb}", "-max_len=1048576", f"-artifact_prefix={findings}",
             "-print_final_stats=1", *libfuzzer_args, corpus]
    if os.path.isdir(regression):
        flags.append(regression)
    atheris.Setup(flags, module.check, custom_mutator=custom_mutator)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
