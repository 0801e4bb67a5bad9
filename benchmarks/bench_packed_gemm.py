"""The packed GEMM against OpenBLAS, shape by shape: one MatMul with a weight B (the transformer
and ConvNeXt shapes) or of two activations (attention's batched products), compiled once and
loaded twice in the same process, with TF_POPEF_GEMM=packed and with TF_POPEF_GEMM=blas (read
when a kernel is prepared), timed interleaved with onnxruntime on the same fp32 model. float16
rows run the float16 model (OpenBLAS behind the float16 adapter against the packed GEMM's own
float16 path).

    .venv/bin/python benchmarks/bench_packed_gemm.py [--shapes bert vit convnext gemv attention] \
        [--precision fp32 fp16] [--budget 2] [--threads 2]

Prints a markdown table: median ms of each, GFLOP/s of the packed GEMM, packed/OpenBLAS and
packed/onnxruntime (lower is better), and the largest difference between the packed and the
OpenBLAS outputs (same model: only the summation order differs).
"""
import argparse
import os
import platform
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compiler import Compiler  # noqa: E402
from compiler.converter import Converter  # noqa: E402
from tf_popef_op.runtime import ModelRunner, RuntimeConfig  # noqa: E402

from interleaved_timing import interleaved, summary  # noqa: E402
from onnxruntime_peer import cpu_session  # noqa: E402

# (M, K, N) per family: BERT L4 H256 S128 (QKV, attention output, FFN up, FFN down) at batch 1
# and 8, ViT-Tiny (197 tokens, H192) at batch 1 and 8, ConvNeXt-Tiny's pointwise layers of the
# first two stages at batch 1, and batch-1 dense layers (M = 1, matrix-vector).
SHAPES = {
    "bert": [(128, 256, 768), (128, 256, 256), (128, 256, 1024), (128, 1024, 256),
             (1024, 256, 768), (1024, 256, 256), (1024, 256, 1024), (1024, 1024, 256)],
    "vit": [(197, 192, 576), (197, 192, 192), (197, 192, 768), (197, 768, 192),
            (1576, 192, 576), (1576, 192, 768), (1576, 768, 192)],
    "convnext": [(3136, 96, 384), (3136, 384, 96), (784, 192, 768), (784, 768, 192)],
    "gemv": [(1, 512, 1024), (1, 1024, 1000), (2, 512, 1024), (4, 768, 768)],
}
# (batch, M, K, N): attention's products of two activations, one per head and image (BERT's
# scores Q·Kᵀ and context P·V at batch 1 and 8, ViT-Tiny's at batch 1); B packed on every run.
ATTENTION = [(4, 128, 64, 128), (4, 128, 128, 64), (32, 128, 64, 128), (32, 128, 128, 64),
             (3, 197, 64, 197), (3, 197, 197, 64)]


def matmul_model(shape):
    """MatMul(X, W) with W a weight for (M, K, N); MatMul(X, W) with W a second input for
    (batch, M, K, N)."""
    *batch, m, k, n = shape
    inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, (*batch, m, k))]
    inits = []
    if batch:
        inputs.append(helper.make_tensor_value_info("W", TensorProto.FLOAT, (*batch, k, n)))
    else:
        w = (np.random.default_rng(0).standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, "W"))
    graph = helper.make_graph([helper.make_node("MatMul", ["X", "W"], ["Y"])], "matmul", inputs,
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, (*batch, m, n))], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def runner_with(executable, choice: str) -> ModelRunner:
    os.environ["TF_POPEF_GEMM"] = choice
    try:
        return ModelRunner(executable, RuntimeConfig())
    finally:
        del os.environ["TF_POPEF_GEMM"]


def bench(shape, precision, threads, budget_s):
    *batch, m, k, n = shape
    model = matmul_model(shape)
    executable = Compiler.compile(Converter(precision=precision).convert(model).SerializeToString(), ["Y"])
    runners = {choice: runner_with(executable, choice) for choice in ("packed", "blas")}
    rng = np.random.default_rng(1)
    feed32 = {i.name: rng.standard_normal(i.shape).astype(np.float32) for i in runners["packed"].get_execute_inputs()}
    feed = {i.name: feed32[i.name].astype(i.numpy_data_type()) for i in runners["packed"].get_execute_inputs()}
    dtype = runners["packed"].get_execute_inputs()[0].numpy_data_type()
    outs = {choice: {"Y": np.zeros((*batch, m, n), dtype)} for choice in runners}
    session = cpu_session(model, threads)
    contenders = {choice: (lambda r=runner, o=outs[choice]: r.execute(feed, o)) for choice, runner in runners.items()}
    contenders["onnxruntime"] = lambda: session.run(["Y"], feed32)
    samples = interleaved(contenders, warmup=10, min_iters=30, max_iters=2000, budget_s=budget_s, gap_s=0.001)
    med = {name: summary(s)["median_ms"] for name, s in samples.items()}
    diff = float(np.max(np.abs(outs["packed"]["Y"].astype(np.float64) - outs["blas"]["Y"].astype(np.float64))))
    return med, 2.0 * np.prod(shape) / (med["packed"] * 1e-3) / 1e9, diff


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", nargs="+", default=[*SHAPES, "attention"], choices=[*SHAPES, "attention"])
    ap.add_argument("--precision", nargs="+", default=["fp32", "fp16"], choices=["fp32", "fp16"])
    ap.add_argument("--budget", type=float, default=2.0, help="seconds of timing per shape and precision")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    args = ap.parse_args()
    print(f"# MatMul with a weight B, interleaved, {args.threads} threads (TF_POPEF_NUM_THREADS / onnxruntime "
          f"intra-op), {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.2f}")
    print("| family | [batch x] M x K x N | precision | packed ms | OpenBLAS ms | onnxruntime fp32 ms | packed GFLOP/s "
          "| packed / OpenBLAS | packed / onnxruntime | max abs diff |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for family in args.shapes:
        for shape in SHAPES.get(family, ATTENTION):
            for precision in args.precision:
                med, gflops, diff = bench(shape, precision, args.threads, args.budget)
                print(f"| {family} | {'x'.join(map(str, shape))} | {precision} | {med['packed']:.3f} | "
                      f"{med['blas']:.3f} | {med['onnxruntime']:.3f} | {gflops:.1f} | "
                      f"{med['packed'] / med['blas']:.2f} | {med['packed'] / med['onnxruntime']:.2f} | {diff:.2g} |",
                      flush=True)


if __name__ == "__main__":
    main()
