"""The machine's measured fp32 GEMM peak, the yardstick of bench_models.py's GFLOP/s column:
one large square MatMul (A fed, B a weight) run through our runtime and through onnxruntime with
the same thread count, interleaved; the peak is the better of the two medians (the best
single iteration is reported too)."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from interleaved_timing import interleaved, summary
from model_contenders import modelrunner, onnxruntime_session


def square_matmul(n: int):
    rng = np.random.default_rng(0)
    b = numpy_helper.from_array(rng.standard_normal((n, n)).astype(np.float32), "B")
    graph = helper.make_graph([helper.make_node("MatMul", ["A", "B"], ["Y"])], f"sgemm{n}",
                              [helper.make_tensor_value_info("A", TensorProto.FLOAT, (n, n))],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, (n, n))], [b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def measure_peak(n: int, threads: int, iters: int) -> dict:
    from compiler import Compiler
    model = square_matmul(n)
    a = np.random.default_rng(1).standard_normal((n, n)).astype(np.float32)
    contenders = [modelrunner("ModelRunner", Compiler.compile(model), a),
                  onnxruntime_session("onnxruntime", model, a, threads)]
    samples = interleaved({c.name: c.call for c in contenders}, warmup=2, min_iters=iters, max_iters=iters,
                          budget_s=0.0)
    flops = 2 * n ** 3
    result = {"n": n, "threads": threads, "flops": flops, "by": {}}
    for name, seconds in samples.items():
        s = summary(seconds)
        result["by"][name] = {**s, "median_gflops": flops / s["median_ms"] / 1e6,
                              "best_gflops": flops / s["min_ms"] / 1e6}
    best = max(result["by"], key=lambda k: result["by"][k]["median_gflops"])
    result["peak_gflops"] = result["by"][best]["median_gflops"]
    result["peak_from"] = best
    return result
