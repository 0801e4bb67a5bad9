"""The C++ runtime's layers (docs/architecture.md, "C++ runtime layers") hold: every
`#include "..."` under tf_popef_op/runtime/cc points to the file's own layer or a lower one,
and nothing includes TensorFlow.

    base  <-  popef  <-  kernels  <-  core  <-  python
    (inside kernels:  kernels/*.h  <-  support/  <-  one folder per op family)

The checker runs on the real tree and on a small fixture tree (include_layers_fixture/) with
a deliberate back-edge, to show that it reports one with its file and line.
"""

import pathlib
import re
from typing import List, NamedTuple

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
RUNTIME_CC = REPO / "tf_popef_op" / "runtime" / "cc"
FIXTURE = pathlib.Path(__file__).resolve().parent / "include_layers_fixture"
PREFIX = "tf_popef_op/runtime/cc/"

# Each layer and the layers it may include (besides itself).
ALLOWED = {
    "base": set(),
    "popef": {"base"},
    "kernels": {"base"},
    "core": {"base", "popef", "kernels"},
    "python": {"base", "popef", "kernels", "core"},
}
# Inside kernels/: the kernel interface (files directly in kernels/), then support/ (thread
# pool, BLAS, SIMD vector math, fp16, activations, epilogue), then the op families, which
# include the two below them and their own folder, never another family.
KERNEL_INTERFACE, KERNEL_SUPPORT = "", "support"
FORBIDDEN_PREFIXES = ("tensorflow/", "tsl/", "xla/", "third_party/tensorflow/", "tf_popef_op/op/")
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')


class Violation(NamedTuple):
    file: str  # relative to the checked root
    line: int
    included: str
    reason: str

    def __str__(self):
        return f"{self.file}:{self.line}: #include \"{self.included}\": {self.reason}"


def _layer_and_folder(rel: pathlib.PurePosixPath):
    """(layer, kernels sub-folder or None) of a path relative to runtime/cc."""
    layer = rel.parts[0]
    folder = (rel.parts[1] if len(rel.parts) > 2 else KERNEL_INTERFACE) if layer == "kernels" else None
    return layer, folder


def _kernel_rank(folder: str) -> int:
    return {KERNEL_INTERFACE: 0, KERNEL_SUPPORT: 1}.get(folder, 2)


def _check_one(src_rel, included: str):
    """The reason `included` may not be included from `src_rel`, or None."""
    if included.startswith(FORBIDDEN_PREFIXES):
        return "the runtime never includes TensorFlow or the TF op"
    if not included.startswith(PREFIX):
        return None  # system and third-party headers (nlohmann, cblas, pybind11, zlib)
    target = pathlib.PurePosixPath(included[len(PREFIX):])
    src_layer, src_folder = _layer_and_folder(src_rel)
    dst_layer, dst_folder = _layer_and_folder(target)
    if dst_layer not in ALLOWED:
        return f"'{dst_layer}' is not a runtime layer ({', '.join(ALLOWED)})"
    if dst_layer != src_layer:
        if dst_layer in ALLOWED[src_layer]:
            return None
        return f"layer '{src_layer}' may include only {sorted(ALLOWED[src_layer] | {src_layer})}, not '{dst_layer}'"
    if src_layer != "kernels" or dst_folder == src_folder:
        return None
    src_rank, dst_rank = _kernel_rank(src_folder), _kernel_rank(dst_folder)
    if dst_rank < src_rank:
        return None
    where = lambda f: f"kernels/{f}/" if f else "the kernel interface (kernels/*.h)"
    return f"{where(src_folder)} may not include {where(dst_folder)}"


def check_include_layers(root: pathlib.Path) -> List[Violation]:
    """Every include-direction violation in the C++ sources under `root` (a runtime/cc tree)."""
    violations = []
    for path in sorted(root.rglob("*")):
        if path.suffix not in (".h", ".cc", ".inc") or not path.is_file():
            continue
        rel = pathlib.PurePosixPath(path.relative_to(root).as_posix())
        if rel.parts[0] not in ALLOWED:
            violations.append(Violation(str(rel), 0, "", f"'{rel.parts[0]}' is not a runtime layer"))
            continue
        for number, text in enumerate(path.read_text().splitlines(), start=1):
            match = INCLUDE.match(text)
            if match:
                reason = _check_one(rel, match.group(1))
                if reason:
                    violations.append(Violation(str(rel), number, match.group(1), reason))
    return violations


def test_runtime_includes_follow_the_layers():
    assert RUNTIME_CC.is_dir()
    violations = check_include_layers(RUNTIME_CC)
    assert not violations, "include-direction violations:\n" + "\n".join(map(str, violations))


def test_every_runtime_source_is_checked():
    # A new top-level folder must be given a place in the layers, not slip past the check.
    folders = {p.name for p in RUNTIME_CC.iterdir() if p.is_dir()}
    assert folders == set(ALLOWED)


@pytest.mark.parametrize("rel, included, reason_part", [
    ("kernels/kernel.h", PREFIX + "core/executable.h", "layer 'kernels' may include only"),
    ("popef/popef_reader.h", PREFIX + "kernels/kernel.h", "layer 'popef' may include only"),
    ("base/error.h", PREFIX + "popef/popef_reader.h", "layer 'base' may include only"),
    ("core/session.h", PREFIX + "python/numpy_tensors.h", "layer 'core' may include only"),
    ("kernels/support/epilogue.h", PREFIX + "kernels/conv/conv_gemm.h", "kernels/support/ may not include"),
    ("kernels/conv/conv.cc", PREFIX + "kernels/nchwc/nchwc_tiles.h", "kernels/conv/ may not include kernels/nchwc/"),
    ("kernels/kernel.h", PREFIX + "kernels/support/thread_pool.h", "the kernel interface"),
    ("core/executable.cc", "tensorflow/core/framework/tensor.h", "never includes TensorFlow"),
])
def test_back_edges_are_rejected(rel, included, reason_part):
    reason = _check_one(pathlib.PurePosixPath(rel), included)
    assert reason is not None and reason_part in reason, reason


@pytest.mark.parametrize("rel, included", [
    ("core/executable.h", PREFIX + "kernels/kernel.h"),
    ("kernels/conv/conv.cc", PREFIX + "kernels/support/epilogue.h"),
    ("kernels/conv/conv.cc", PREFIX + "kernels/conv/depthwise_conv.h"),
    ("kernels/support/epilogue.h", PREFIX + "kernels/kernel_checks.h"),
    ("python/bindings.cc", PREFIX + "core/model_runner.h"),
    ("kernels/kernel.h", "nlohmann/json.hpp"),
])
def test_downward_includes_are_accepted(rel, included):
    assert _check_one(pathlib.PurePosixPath(rel), included) is None


def test_fixture_back_edges_are_reported_with_file_and_line():
    violations = check_include_layers(FIXTURE)
    found = {(v.file, v.line, v.included) for v in violations}
    assert found == {
        ("kernels/kernel.h", 4, PREFIX + "core/executable.h"),
        ("kernels/conv/conv.cc", 3, PREFIX + "kernels/nchwc/tiles.h"),
        ("core/executable.cc", 5, "tensorflow/core/framework/tensor.h"),
    }, "\n".join(map(str, violations))
    assert all(str(v).startswith(f"{v.file}:{v.line}: ") for v in violations)
