"""Shared helpers of the compiler tests: building small ONNX models, running them with
onnx's ReferenceEvaluator (and onnxruntime), running passes."""
import copy
import os
import subprocess
import sys
from typing import Dict, List, Optional, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from compiler.converter.context import PassContext
from compiler.converter.pipeline import run_passes

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYTHON = os.path.join(REPO, ".venv", "bin", "python")
F32, F16, I64, I32 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT64, TensorProto.INT32


def make_model(nodes, inputs, outputs, initializers: Optional[Dict[str, np.ndarray]] = None, opset: int = 13,
               value_info=None, ir_version: Optional[int] = None) -> onnx.ModelProto:
    """inputs/outputs: (name, elem_type, shape or None) tuples."""
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()],
        value_info=value_info or [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    if ir_version is not None:
        model.ir_version = ir_version
    return model


def fuse_and_lower(model: onnx.ModelProto, weights, model_name: str = "<model>", name: str = "graph0",
                   batch_size: Optional[int] = None, batch_axis: int = 0, blocked_layout: bool = True):
    """What the compile step lowers: the kernel fusion stage, then lower_graph with the
    converter's preparation of control-flow bodies."""
    from compiler.converter.pipeline import prepare_control_flow_body
    from compiler.kernel_fusion import run_kernel_fusions
    from compiler.lowering.lower_graph import lower_graph
    fused = run_kernel_fusions(model, model_name, blocked_layout)
    return lower_graph(fused, weights, model_name, name, batch_size, batch_axis, prepare_control_flow_body)


def reference_run(model: onnx.ModelProto, feeds: Dict[str, np.ndarray]) -> List[np.ndarray]:
    from onnx.reference import ReferenceEvaluator
    return [np.asarray(v) for v in ReferenceEvaluator(model).run(None, feeds)]


def ort_run(model: onnx.ModelProto, feeds: Dict[str, np.ndarray], optimize: bool = True) -> List[np.ndarray]:
    """onnxruntime's outputs; optimize=False turns its graph optimizations off (some of them
    change results: its Pad fusion folds a zero Pad into MaxPool as if the pads were -inf)."""
    import onnxruntime as ort
    oracle = copy.deepcopy(model)
    oracle.ir_version = min(oracle.ir_version, 8)
    options = ort.SessionOptions()
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(oracle.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def run_pass(model: onnx.ModelProto, names, **ctx_args) -> onnx.ModelProto:
    model = copy.deepcopy(model)
    names = [names] if isinstance(names, str) else list(names)
    ctx_args.setdefault("model_name", "test.onnx")
    return run_passes(model, names, PassContext(**ctx_args))


def op_types(model: onnx.ModelProto) -> List[str]:
    return [n.op_type for n in model.graph.node]


def conv_named(model: onnx.ModelProto, name: str) -> onnx.NodeProto:
    [node] = [n for n in model.graph.node if n.op_type == "NchwcConv" and n.name == name]
    return node


def strides(node: onnx.NodeProto) -> List[int]:
    return [list(a.ints) for a in node.attribute if a.name == "strides"][0]


def assert_same_outputs(before: onnx.ModelProto, after: onnx.ModelProto, feeds, rtol=1e-6, atol=1e-6,
                        after_feeds=None):
    expected = reference_run(before, feeds)
    got = reference_run(after, after_feeds if after_feeds is not None else feeds)
    assert len(expected) == len(got)
    for e, g in zip(expected, got):
        assert e.shape == g.shape, (e.shape, g.shape)
        np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol)


def random_feeds(model: onnx.ModelProto, seed: int = 0) -> Dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    inits = {t.name for t in model.graph.initializer}
    feeds = {}
    for inp in model.graph.input:
        if inp.name in inits:
            continue
        tt = inp.type.tensor_type
        shape = [d.dim_value for d in tt.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if np.dtype(dtype).kind == "f":
            feeds[inp.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[inp.name] = rng.integers(-5, 6, shape).astype(dtype)
    return feeds


def check_fused_against_onnxruntime(original: onnx.ModelProto, fused: onnx.ModelProto, rtol: float) -> None:
    """A kernel-fused model is valid ONNX, lowers, and its internal ops (run by
    nchwc_reference_ops) give onnxruntime's outputs of the original within rtol of each output's
    scale."""
    from compiler.converter.pipeline import prepare_control_flow_body
    from compiler.lowering.lower_graph import lower_graph
    from compiler.lowering.weights import WeightStore
    from nchwc_reference_ops import run_internal
    onnx.checker.check_model(fused)
    lower_graph(fused, WeightStore(), "test.onnx", prepare_body=prepare_control_flow_body)
    feeds = random_feeds(original)
    want, got = ort_run(original, feeds), run_internal(fused, feeds)
    for w, g in zip(want, got):
        w = w.astype(np.float32)
        np.testing.assert_allclose(g.astype(np.float32), w, rtol=rtol, atol=rtol * max(1.0, float(np.abs(w).max())))


def check_kernel_fusion_numerics(model: onnx.ModelProto, feeds: Dict[str, np.ndarray], fp16: bool = True) -> None:
    """The emulator with kernel fusion on matches onnxruntime on the (unfused) model and itself
    with kernel fusion off, in fp32 (1e-4 of the output scale) and, with `fp16`, in fp16 (2e-2).
    The model's output is "Y"."""
    from compiler import Compiler
    from compiler.converter import Converter
    from compiler.options import CompilerOptions
    from tf_popef_op.runtime import ModelRunner, RuntimeConfig
    want = ort_run(model, feeds)[0]
    scale = max(1.0, float(np.abs(want).max()))
    got = ModelRunner(Compiler.compile(model), RuntimeConfig()).execute(feeds)["Y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale)
    unfused = ModelRunner(Compiler.compile(model, options=CompilerOptions(kernel_fusion=False)),
                          RuntimeConfig()).execute(feeds)["Y"]
    np.testing.assert_allclose(got, unfused, rtol=1e-4, atol=1e-4 * scale)
    if fp16:
        half = Converter(precision="fp16").convert(model)
        got16 = ModelRunner(Compiler.compile(half), RuntimeConfig()).execute(
            {k: v.astype(np.float16) for k, v in feeds.items()})["Y"].astype(np.float32)
        np.testing.assert_allclose(got16, want, rtol=2e-2, atol=2e-2 * scale)


def _python(args: Sequence[str], cwd: Optional[str], first_on_path: Optional[str] = None):
    env = dict(os.environ)
    path = [p for p in (first_on_path, REPO, env.get("PYTHONPATH")) if p]
    env["PYTHONPATH"] = os.pathsep.join(path)
    python = PYTHON if os.path.exists(PYTHON) else sys.executable
    return subprocess.run([python, *args], cwd=cwd or REPO, env=env, capture_output=True, text=True, timeout=300)


def run_cli(args: Sequence[str], cwd: Optional[str] = None, module: str = "compiler.cli",
            first_on_path: Optional[str] = None):
    """Runs `python -m <module> args` with the repository importable; returns CompletedProcess."""
    return _python(["-m", module, *args], cwd, first_on_path)


def run_python(code: str, cwd: Optional[str] = None):
    return _python(["-c", code], cwd)
