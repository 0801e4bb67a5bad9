"""A ResNet projection block's two strided 1x1 convolutions (its first 1x1 and its shortcut, both
stride 2 on the same X) on one shared subsample step against onnxruntime: the compiler writes
one NchwcMaxPool with a 1x1 window (share_strided_subsample) and both convolutions run stride 1
on its output; the shortcut is still the next 1x1's in-place Sum. Batches 1 and 8, a plane of
14 (rows of 7 outputs) and one of 28 (rows of 14); float32 within 1e-4 of onnxruntime, float16
within the float16 tolerance; also in processes on the AVX2 and portable SIMD paths."""
import numpy as np
import pytest

from compiler import Compiler
from compiler.converter import Converter
from e2e_helpers import assert_matches_fp32_reference, check_every_case_in_new_process, run_onnxruntime
from residual_blocks import resnet_blocks, sums_in_place
from tf_popef_op.runtime import ModelRunner, RuntimeConfig

# name: (batch, plane side)
CASES = {"b1": (1, 14), "b8": (8, 14), "b1_plane28": (1, 28)}


def check_case(name, precision):
    n, side = CASES[name]
    model = resnet_blocks(n, False, side=side)
    x = np.random.default_rng(2).standard_normal((n, 8, side, side)).astype(np.float32)
    want = run_onnxruntime(model, {"X": x})["Y"]
    executable = Compiler.compile(Converter(precision=precision).convert(model))
    assert sums_in_place(executable) == (3, 3), name
    runner = ModelRunner(executable, RuntimeConfig(profile=True))
    got = runner.execute({"X": x.astype(np.float16) if precision == "fp16" else x})["Y"].astype(np.float32)
    ops = [row["op"] for row in runner.profile()]
    # the subsample is the model's only pooling step
    assert ops.count("NchwcMaxPool") == 1 and ops.count("ToNchwc") == 1, f"{name}: {ops}"
    assert_matches_fp32_reference(got, want, precision, name)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", list(CASES))
def test_shared_subsample_vs_onnxruntime(name, precision):
    check_case(name, precision)


@pytest.mark.parametrize("simd", ["avx2", "portable"])
def test_shared_subsample_vs_onnxruntime_on_the_other_simd_paths(simd):
    check_every_case_in_new_process("test_strided_subsample", len(CASES), TF_POPEF_SIMD=simd)
