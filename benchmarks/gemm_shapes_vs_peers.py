"""Every dense-layer shape of ConvNeXt-Tiny, ViT-Tiny and BERT-L4-H256 as one MatMul + bias
(+ Gelu where the model has one after it), ours against OpenVINO and onnxruntime on the same
fp32 ONNX, interleaved (interleaved_timing.py), at batch 1 and 8: where the MatMul/Gemm op
class of the model profiles wins or loses, shape by shape, with the epilogue each peer fuses
(OpenVINO fuses bias and Gelu into its MatMul; onnxruntime runs them as separate ops).

    .venv/bin/python benchmarks/gemm_shapes_vs_peers.py [--models convnext vit bert] \
        [--batches 1 8] [--threads 2] [--precision fp32] [--budget 0.5] [--no-peers]

Prints a markdown table of medians (ms) per shape, ours/peer ratios, and per model and batch
the sum over its layers (median × the number of such layers in the model). --no-peers times
ours only (A/B of builds or TF_POPEF_* settings, one process per setting).
"""
import argparse
import os
import sys
import tempfile

import numpy as np
from onnx import TensorProto, helper, numpy_helper

# (M per image, K, N, Gelu after it, layers of this shape in the model)
MODELS = {
    "convnext": [(3136, 96, 384, 1, 3), (3136, 384, 96, 0, 3), (784, 192, 768, 1, 3), (784, 768, 192, 0, 3),
                 (196, 384, 1536, 1, 9), (196, 1536, 384, 0, 9), (49, 768, 3072, 1, 3), (49, 3072, 768, 0, 3)],
    "vit": [(197, 192, 576, 0, 12), (197, 192, 192, 0, 12), (197, 192, 768, 1, 12), (197, 768, 192, 0, 12)],
    "bert": [(128, 256, 768, 0, 4), (128, 256, 256, 0, 4), (128, 256, 1024, 1, 4), (128, 1024, 256, 0, 4)],
    # float32 K < 128: where TF_POPEF_GEMM=auto's K threshold comes from
    "small_k": [(3136, 16, 64, 0, 1), (3136, 32, 128, 0, 1), (3136, 64, 256, 1, 1), (784, 48, 192, 0, 1),
                (3136, 96, 384, 0, 1)],
}


def dense_model(m, k, n, gelu):
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
    b = (rng.standard_normal(n) * 0.1).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["X", "W"], ["T"]), helper.make_node("Add", ["T", "B"], ["U" if gelu else "Y"])]
    if gelu:
        nodes.append(helper.make_node("Gelu", ["U"], ["Y"]))
    graph = helper.make_graph(nodes, "dense", [helper.make_tensor_value_info("X", TensorProto.FLOAT, (m, k))],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, (m, n))],
                              [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=["convnext", "vit", "bert"], choices=list(MODELS))
    ap.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "fp16"], help="our model's precision")
    ap.add_argument("--budget", type=float, default=0.5, help="seconds of timing per shape")
    ap.add_argument("--no-peers", action="store_true")
    args = ap.parse_args()
    os.environ["TF_POPEF_NUM_THREADS"] = str(args.threads)  # read when the pool is first used
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, root)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from compiler import Compiler
    from compiler.converter import Converter
    from tf_popef_op.runtime import ModelRunner, RuntimeConfig
    from interleaved_timing import interleaved, summary
    from onnxruntime_peer import cpu_session
    import openvino_peer

    print(f"# {args.threads} threads, ours {args.precision}, peers fp32, load average {os.getloadavg()[0]:.2f}")
    print("| model | batch | M x K x N | Gelu | ours ms | OpenVINO ms | onnxruntime ms | ours GFLOP/s "
          "| ours / OpenVINO | ours / onnxruntime | layers |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    totals = {}
    for name in args.models:
        for batch in args.batches:
            for m, k, n, gelu, count in MODELS[name]:
                rows = m * batch
                model = dense_model(rows, k, n, gelu)
                onnx_bytes = Converter(precision=args.precision).convert(model).SerializeToString()
                executable = Compiler.compile(onnx_bytes, ["Y"])
                runner = ModelRunner(executable, RuntimeConfig())
                dtype = runner.get_execute_inputs()[0].numpy_data_type()
                x32 = np.random.default_rng(1).standard_normal((rows, k)).astype(np.float32)
                feed, out = {"X": x32.astype(dtype)}, {"Y": np.zeros((rows, n), dtype)}
                contenders = {"ours": lambda: runner.execute(feed, out)}
                if not args.no_peers:
                    with tempfile.TemporaryDirectory() as tmp:
                        path = os.path.join(tmp, "dense.onnx")
                        with open(path, "wb") as f:
                            f.write(model.SerializeToString())
                        compiled = openvino_peer.compiled_model(path, args.threads, "fp32", pinning=False)
                        request = compiled.create_infer_request()
                    session = cpu_session(model, args.threads)
                    contenders["OpenVINO"] = lambda: request.infer({0: x32})
                    contenders["onnxruntime"] = lambda: session.run(["Y"], {"X": x32})
                samples = interleaved(contenders, warmup=5, min_iters=15, max_iters=3000, budget_s=args.budget,
                                      gap_s=0.001)
                med = {c: summary(s)["median_ms"] for c, s in samples.items()}
                for c, v in med.items():
                    totals[(name, batch, c)] = totals.get((name, batch, c), 0.0) + v * count
                ov, ort = med.get("OpenVINO", float("nan")), med.get("onnxruntime", float("nan"))
                print(f"| {name} | {batch} | {rows}x{k}x{n} | {'yes' if gelu else ''} | {med['ours']:.3f} | {ov:.3f} | "
                      f"{ort:.3f} | {2 * rows * k * n / med['ours'] / 1e6:.1f} | {med['ours'] / ov:.2f} | "
                      f"{med['ours'] / ort:.2f} | {count} |", flush=True)
    print()
    print("| model | batch | ours ms (sum over layers) | OpenVINO ms | onnxruntime ms |")
    print("|---|---:|---:|---:|---:|")
    for name, batch in sorted({(a, b) for a, b, _ in totals}):
        get = lambda c: totals.get((name, batch, c), float("nan"))  # noqa: E731
        print(f"| {name} | {batch} | {get('ours'):.2f} | {get('OpenVINO'):.2f} | {get('onnxruntime'):.2f} |")
    print(f"\n# load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
