import numpy as np
import pytest
from onnx import helper

from compiler import CompilerOptions
from compiler.compiler import Compiler
from compiler.errors import DeviceMemoryError
from compiler.lowering.device_memory import IPU_MEMORY_BYTES, available_bytes
from compiler_test_helpers import F32, make_model


def test_ipu_memory_constant():
    assert IPU_MEMORY_BYTES == 1472 * 624 * 1024 == 940_572_672
    assert available_bytes(2) == 2 * IPU_MEMORY_BYTES and available_bytes(1, 1000) == 1000


def test_activation_too_big_for_the_device_is_a_compile_error():
    # Gemm output [16384, 16384] float32 = 1 GiB in the arena; nothing of that size is allocated.
    nodes = [helper.make_node("Gemm", ["A", "B"], ["G"]), helper.make_node("Relu", ["G"], ["O"])]
    model = make_model(nodes, [("A", F32, [16384, 1]), ("B", F32, [1, 16384])], [("O", F32, [16384, 16384])])
    with pytest.raises(DeviceMemoryError) as e:  # unfused: fused, Gemm would write O directly
        Compiler.compile(model, ["O"], CompilerOptions(kernel_fusion=False))
    msg = str(e.value)
    assert "needs 1,073,741,824 bytes of device memory (weights 0 + activations 1,073,741,824)" in msg
    assert "the ipu2 device has 940,572,672" in msg


def test_weights_count_too_and_device_memory_bytes_overrides_the_limit():
    model = make_model([helper.make_node("MatMul", ["X", "W"], ["h"]), helper.make_node("Relu", ["h"], ["O"])],
                       [("X", F32, [4, 64])], [("O", F32, [4, 64])], {"W": np.ones((64, 64), np.float32)})
    options = CompilerOptions(ipu_version="ipu21", device_memory_bytes=16384 + 1023, kernel_fusion=False)
    with pytest.raises(DeviceMemoryError, match="weights 16,384 \\+ activations 1,024\\) but the ipu21 device has 17,407"):
        Compiler.compile(model, ["O"], options)
    options.device_memory_bytes = 16384 + 1024
    assert Compiler.compile(model, ["O"], options).metadata["device_memory"]["total_bytes"] == 17408
