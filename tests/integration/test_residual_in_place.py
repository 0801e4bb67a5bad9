"""ResNet blocks with the residual Sum added in place against onnxruntime: the memory plan gives
each block's last 1x1 convolution (Conv + Add + Relu, one NchwcConv) its Sum's bytes
(`in_place_input`), so Y overwrites the shortcut it reads. Identity blocks chain (one block's
output is the next one's Sum), a projection block's Sum is its strided 1x1 shortcut, and a
block whose expanding 1x1 reads 528 channels takes two passes over them (float32 Y then holds
partial sums in the Sum's bytes). float32 within 1e-4 of onnxruntime; float16 within the
float16 tolerance; also in a process on the portable SIMD path."""
import numpy as np
import pytest

from compiler import Compiler
from compiler.converter import Converter
from e2e_helpers import assert_matches_fp32_reference, check_every_case_in_new_process, run_onnxruntime
from residual_blocks import resnet_blocks, sums_in_place
from tf_popef_op.runtime import ModelRunner, RuntimeConfig


# name: (batch, wide bottlenecks, Sums in place): the last block writes the graph output (after
# FromNchwc: its Y is still an arena tensor), so all three blocks take their Sum's bytes.
CASES = {"b1": (1, False, 3), "b8": (8, False, 3), "wide_b2": (2, True, 3)}


def check_case(name, precision):
    n, wide, expected = CASES[name]
    model = resnet_blocks(n, wide)
    x = np.random.default_rng(1).standard_normal((n, 8, 14, 14)).astype(np.float32)
    want = run_onnxruntime(model, {"X": x})["Y"]
    executable = Compiler.compile(Converter(precision=precision).convert(model))
    assert sums_in_place(executable) == (expected, 3), name
    runner = ModelRunner(executable, RuntimeConfig(profile=True))
    got = runner.execute({"X": x.astype(np.float16) if precision == "fp16" else x})["Y"].astype(np.float32)
    ops = [row["op"] for row in runner.profile()]
    assert ops.count("ToNchwc") == 1 and "FromNchwc" in ops, f"{name}: the blocks run blocked: {ops}"
    assert_matches_fp32_reference(got, want, precision, name)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("name", list(CASES))
def test_residual_blocks_in_place_vs_onnxruntime(name, precision):
    check_case(name, precision)


def test_residual_blocks_in_place_vs_onnxruntime_on_the_portable_path():
    check_every_case_in_new_process("test_residual_in_place", len(CASES), TF_POPEF_SIMD="portable")
