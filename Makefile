# Two commands do everything on a fresh machine (Python 3.11, g++, pip reachable):
#   make demo   - create .venv, install pinned dependencies and the package, run the examples
#   make test   - same set-up, then the whole test suite
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
STAMP  := $(VENV)/.deps-stamp

.PHONY: all venv system-deps build demo test test-fast bench fuzz fuzz-asan soak clean

all: build

$(PY):
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip

# Dependencies are reinstalled only when a requirements file changes.
$(STAMP): $(PY) requirements.txt requirements-build.txt requirements-test.txt requirements-serving-nodeps.txt
	$(PIP) install --quiet -r requirements-build.txt -r requirements-test.txt
	$(PIP) install --quiet --no-deps -r requirements-serving-nodeps.txt
	touch $@

venv: $(STAMP)

EDITABLE := $(VENV)/.editable-stamp

# Editable install (console scripts, package metadata): redone when setup.py changes.
$(EDITABLE): $(STAMP) setup.py | system-deps
	$(PIP) install --quiet --no-build-isolation --no-deps -e .
	touch $@

# System packages of the native KServe v2 gRPC listener (gRPC C++, protoc): installed with
# apt-get when missing and running as root, else the build stops naming them.
NATIVE_GRPC_PACKAGES := libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc pkg-config

system-deps:
	@if ! (command -v pkg-config && pkg-config --exists grpc++ protobuf && command -v protoc \
	      && command -v grpc_cpp_plugin) >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(NATIVE_GRPC_PACKAGES); \
	  else \
	    echo "make build needs the system packages $(NATIVE_GRPC_PACKAGES) (gRPC C++ for" \
	         "serving/kserve_native): run as root, or: sudo apt-get install $(NATIVE_GRPC_PACKAGES)" >&2; \
	    exit 1; \
	  fi; \
	fi

# CMake build of the C++ runtime, the TF op and the native KServe v2 listener (incremental).
build: system-deps $(EDITABLE)
	$(PY) setup.py --quiet build_ext --inplace

demo: build
	@echo "== dynamic batch size: compile an Add model at batch 4, run batches 1, 4, 7"
	cd examples/dynamic_batch_size && ../../$(PY) dynamic_batch_size.py
	@echo "== model fusion: fuse model0 (fp32) and model1 (fp16) into one PopEF, inspect it, run both"
	cd examples/model_fusion && ../../$(PY) compile.py && ../../$(VENV)/bin/popef_dump executable.popef && ../../$(PY) run.py && echo "run.py: both subgraphs gave the expected results"
	@echo "== serving: fuse three models, export a SavedModel, serve it, gRPC + REST predicts vs the originals"
	cd examples/serving_demo && ../../$(PY) run_demo.py

test: build
	$(PY) -m pytest -q --durations=25 tests

BENCH_STAMP := $(VENV)/.bench-deps-stamp

$(BENCH_STAMP): $(STAMP) requirements-bench.txt
	$(PIP) install --quiet -r requirements-bench.txt
	touch $@

# The real-network suite: eight networks against onnxruntime and OpenVINO (the peak, latency
# and profile parts alone took 28-33 min on 2 cores; plus a one-time tf2onnx export of the
# networks); docs/benchmarks.md quotes this exact command.
bench: build $(BENCH_STAMP)
	$(PY) benchmarks/bench_mlp.py
	mkdir -p build/bench
	$(PY) benchmarks/bench_models.py --markdown build/bench/bench_models.md --json build/bench/bench_models.json --chart docs/benchmarks_models.png

FUZZ_STAMP   := $(VENV)/.fuzz-deps-stamp
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= runtime_popef python_popef compiler_onnx compiler_fusion_yaml \
                serving_rest_json serving_kserve_rest serving_predict_proto serving_kserve_grpc
FUZZ_ARGS    ?=

$(FUZZ_STAMP): $(STAMP) requirements-fuzz.txt
	$(PIP) install --quiet -r requirements-fuzz.txt
	touch $@

# Coverage-guided fuzzing (docs/reliability.md): each target runs FUZZ_SECONDS; new corpus
# entries and findings go to build/fuzz/<target>/. FUZZ_ARGS go to libFuzzer (CI runs a fixed
# seed and run count, so its slice is the same inputs every time).
fuzz: build $(FUZZ_STAMP)
	for t in $(FUZZ_TARGETS); do nice -n 10 $(PY) tests/fuzz/run_fuzz.py $$t --seconds $(FUZZ_SECONDS) $(FUZZ_ARGS) || exit 1; done

FUZZ_ASAN_DIR     := build/fuzz-asan
FUZZ_ASAN_TARGETS ?= runtime_popef

# The targets that reach the C++ runtime, run on a separate build of it with ASan, UBSan and
# libFuzzer edge coverage (tests/fuzz/sanitizer_build.py; needs clang with compiler-rt and fails
# saying so without it). The in-place build is untouched; runs go to build/fuzz-asan/work/.
fuzz-asan: $(FUZZ_STAMP)
	$(PY) tests/fuzz/sanitizer_build.py --out $(FUZZ_ASAN_DIR)
	for t in $(FUZZ_ASAN_TARGETS); do nice -n 10 $(PY) tests/fuzz/run_fuzz.py $$t --sanitizer-build $(FUZZ_ASAN_DIR) --workdir $(FUZZ_ASAN_DIR)/work --seconds $(FUZZ_SECONDS) $(FUZZ_ARGS) || exit 1; done

SOAK_CLIENTS ?= 64
SOAK_SECONDS ?= 60

# Soak / load test of the model server (loopback, about SOAK_SECONDS + 30 s; not part of
# `make test`): docs/reliability.md, "The model server" quotes its results.
soak: build
	$(PY) benchmarks/soak.py --clients $(SOAK_CLIENTS) --seconds $(SOAK_SECONDS) --json build/soak/soak.json

clean:
	rm -rf build tf_popef_op/lib tf_popef_op/runtime/_runtime*.so serving/kserve_native/_kserve_native*.so *.egg-info
