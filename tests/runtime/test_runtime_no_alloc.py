"""Builds tests/runtime/cc/no_alloc_test.cc (a program whose global operator new and malloc count
allocations) against the runtime library and runs it: steady-state ModelRunner::Execute calls
(zero-copy, runner-allocated outputs, staged batches, profiling on, a fused executable's Switch,
and a compiled conv network's GEMM/depthwise/FusedElementwise kernels on the intra-op pool, then
its blocked-layout NchwcConv/reorder kernels) must
allocate nothing on any thread. Mallocs made inside OpenBLAS itself (its small-matrix SGEMM kernels
on AVX-512 hosts) are counted separately and reported, not failed."""
import subprocess

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from compiler import Compiler
from compiler.options import CompilerOptions
from tf_popef_op.runtime import ModelRunner, RuntimeConfig
from popef_builders import fused_model, weight_model
from runtime_test_programs import build_test_program


def conv_network():
    """X [2, 16, 48, 48] -> 1x1 conv + Relu6 -> depthwise 3x3 stride 2 + per-channel affine + Relu6
    -> 3x3 conv (im2col) + residual-free bias -> Transpose -> x * tanh(x) * 0.5 + 1 (a chain no
    conv epilogue can take, so FusedElementwise)."""
    rng = np.random.default_rng(0)
    w = lambda *shape: numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32))
    inits = []

    def const(name, *shape, value=None):
        t = w(*shape) if value is None else numpy_helper.from_array(np.asarray(value, np.float32))
        t.name = name
        inits.append(t)
        return name
    nodes = [
        helper.make_node("Conv", ["X", const("W1", 32, 16, 1, 1), const("B1", 32)], ["c1"]),
        helper.make_node("Clip", ["c1", const("lo", value=0.0), const("hi", value=6.0)], ["r1"]),
        helper.make_node("Conv", ["r1", const("W2", 32, 1, 3, 3)], ["c2"], group=32, strides=[2, 2],
                         pads=[1, 1, 1, 1]),
        helper.make_node("Mul", ["c2", const("S2", 32, 1, 1)], ["m2"]),
        helper.make_node("Add", ["m2", const("B2", 32, 1, 1)], ["a2"]),
        helper.make_node("Clip", ["a2", "lo", "hi"], ["r2"]),
        helper.make_node("Conv", ["r2", const("W3", 16, 32, 3, 3), const("B3", 16)], ["c3"], pads=[1, 1, 1, 1]),
        helper.make_node("Transpose", ["c3"], ["t"], perm=[0, 2, 3, 1]),
        helper.make_node("Tanh", ["t"], ["th"]),
        helper.make_node("Mul", ["t", "th"], ["p"]),
        helper.make_node("Mul", ["p", const("half", value=0.5)], ["q"]),
        helper.make_node("Add", ["q", const("one", value=1.0)], ["Y"]),
    ]
    graph = helper.make_graph(nodes, "conv_network", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 16, 48, 48])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 24, 24, 16])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_execute_path_allocates_nothing(tmp_path):
    binary = build_test_program("no_alloc_test.cc", tmp_path / "no_alloc_test")
    weight = (0.5 * np.arange(1, 9, dtype=np.float32)).reshape(4, 2)  # the values the C++ test expects
    weights = weight_model(weight).write(tmp_path / "weight.popef")
    fused = fused_model().write(tmp_path / "fused.popef")
    # The scenarios are about these kernels: make sure the compiler still produces them (the
    # NCHW ones with blocked_layout=False, the NCHW8c ones by default).
    networks = []
    for blocked, ops in ((False, {"FusedConv", "Conv", "FusedElementwise"}),
                         (True, {"NchwcConv", "ToNchwc", "FromNchwc", "FusedElementwise"})):
        network = Compiler.compile(conv_network(), options=CompilerOptions(blocked_layout=blocked))
        runner = ModelRunner(network, RuntimeConfig(profile=True))
        runner.execute({"X": np.zeros((2, 16, 48, 48), np.float32)})
        assert ops <= {row["op"] for row in runner.profile()}
        networks.append(str(tmp_path / f"conv_network_blocked{int(blocked)}.popef"))
        network.save(networks[-1])
    out = subprocess.run([str(binary), weights, fused, *networks], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "no allocation on the execute path" in out.stdout
    # Every scenario ran and reported its (zero) count.
    assert out.stdout.count(": 0 allocations in 2000 executes") == 7, out.stdout
    # OpenBLAS's own mallocs (its AVX-512 small-matrix kernels) are reported, not ours to remove;
    # everything else (the runtime, its kernels, the pool) must be zero, as asserted above.
