"""ResNet's stage boundary with the identity block's 3x3 computing only the pixels the projection
block reads (subsample_into_producer: the 3x3 runs stride 2 as a direct convolution, the
expanding 1x1 after it stride 1, its Sum read through a subsample step), on the runtime against
onnxruntime within the fp32 / fp16 tolerances, and against the same model compiled without the
pass within the fp32 tolerance. Batches 1 and 8; planes of 14 and 28; also in processes on the
AVX2 and portable SIMD paths."""
import numpy as np
import pytest

from compiler import Compiler
from compiler.converter import Converter
from compiler.kernel_fusion import pipeline
from e2e_helpers import assert_matches_fp32_reference, check_every_case_in_new_process, run_onnxruntime
from residual_blocks import resnet_blocks
from tf_popef_op.runtime import ModelRunner, RuntimeConfig

PASS = "subsample_into_producer"
# name: (batch, plane side)
CASES = {"b1": (1, 14), "b8": (8, 14), "b1_plane28": (1, 28)}


def _run(model, precision, x, without_pass: bool):
    passes = pipeline.KERNEL_FUSION_PIPELINE
    if without_pass:
        pipeline.KERNEL_FUSION_PIPELINE = [p for p in passes if p != PASS]
    try:
        executable = Compiler.compile(Converter(precision=precision).convert(model))
    finally:
        pipeline.KERNEL_FUSION_PIPELINE = passes
    runner = ModelRunner(executable, RuntimeConfig(profile=True))
    y = runner.execute({"X": x.astype(np.float16) if precision == "fp16" else x})["Y"]
    return y, [row for row in runner.profile()]


def check_case(name, precision):
    n, side = CASES[name]
    model = resnet_blocks(n, False, side=side)
    x = np.random.default_rng(3).standard_normal((n, 8, side, side)).astype(np.float32)
    want = run_onnxruntime(model, {"X": x})["Y"]
    got, profile = _run(model, precision, x, without_pass=False)
    before, profile_before = _run(model, precision, x, without_pass=True)
    # the one pool left subsamples the stem's output for block1's expanding 1x1's Sum (without the
    # pass: block1's output, for the projection block)
    pools = [row["node"] for row in profile if row["op"] == "NchwcMaxPool"]
    pools_before = [row["node"] for row in profile_before if row["op"] == "NchwcMaxPool"]
    assert len(pools) == 1 and pools[0].endswith("__sum_subsample"), f"{name}: {pools}"
    assert len(pools_before) == 1 and not pools_before[0].endswith("__sum_subsample"), f"{name}: {pools_before}"
    assert_matches_fp32_reference(got.astype(np.float32), want, precision, name)
    assert_matches_fp32_reference(before.astype(np.float32), want, precision, f"{name} without {PASS}")
    if precision == "fp32":
        np.testing.assert_allclose(got, before, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(before).max())))


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", list(CASES))
def test_strided_producers_vs_onnxruntime_and_without_the_pass(name, precision):
    check_case(name, precision)


@pytest.mark.parametrize("simd", ["avx2", "portable"])
def test_strided_producer_on_the_other_simd_paths(simd):
    check_every_case_in_new_process("test_subsample_into_producer", len(CASES), TF_POPEF_SIMD=simd)
