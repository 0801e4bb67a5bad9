"""The machine's measured fp32 GEMM peak, the yardstick of bench_models.py's GFLOP/s column:
one large square MatMul (A fed, B a weight) run through our runtime and through onnxruntime with
the same thread count; the peak is the better of the two medians (the best single iteration is
reported too).

The machines drift by 20-30 % within minutes, so a peak measured once before the models is not
their yardstick: bench_models.py also times these two MatMuls inside every latency cell,
interleaved with the models (`contenders` + `peak_from_samples`), and each cell's share of peak
is taken against its own interleaved peak."""
from typing import Dict, List

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from interleaved_timing import interleaved, summary
from model_contenders import Contender, modelrunner, onnxruntime_session

PREFIX = "sgemm peak: "  # names of the peak contenders among a cell's contenders


def square_matmul(n: int):
    rng = np.random.default_rng(0)
    b = numpy_helper.from_array(rng.standard_normal((n, n)).astype(np.float32), "B")
    graph = helper.make_graph([helper.make_node("MatMul", ["A", "B"], ["Y"])], f"sgemm{n}",
                              [helper.make_tensor_value_info("A", TensorProto.FLOAT, (n, n))],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, (n, n))], [b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def contenders(n: int, threads: int) -> List[Contender]:
    from compiler import Compiler
    model = square_matmul(n)
    a = np.random.default_rng(1).standard_normal((n, n)).astype(np.float32)
    return [modelrunner(PREFIX + "ModelRunner", Compiler.compile(model), a),
            onnxruntime_session(PREFIX + "onnxruntime", model, a, threads)]


def peak_from_samples(samples: Dict[str, List[float]], n: int, threads: int) -> dict:
    """The peak of the PREFIX-named entries of an interleaved() result (other entries ignored)."""
    flops = 2 * n ** 3
    result = {"n": n, "threads": threads, "flops": flops, "by": {}}
    for name, seconds in samples.items():
        if not name.startswith(PREFIX):
            continue
        s = summary(seconds)
        result["by"][name[len(PREFIX):]] = {**s, "median_gflops": flops / s["median_ms"] / 1e6,
                                            "best_gflops": flops / s["min_ms"] / 1e6}
    if not result["by"]:
        raise ValueError(f"no '{PREFIX}' contender among the samples: {sorted(samples)}")
    best = max(result["by"], key=lambda k: result["by"][k]["median_gflops"])
    result["peak_gflops"] = result["by"][best]["median_gflops"]
    result["peak_from"] = best
    return result


def measure_peak(n: int, threads: int, iters: int, peak_contenders: List[Contender] = None) -> dict:
    peak_contenders = peak_contenders or contenders(n, threads)
    samples = interleaved({c.name: c.call for c in peak_contenders}, warmup=2, min_iters=iters, max_iters=iters,
                          budget_s=0.0)
    return peak_from_samples(samples, n, threads)
