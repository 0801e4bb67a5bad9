"""One depthwise 3x3 layer alone (EfficientNetB0's block1a, MobileNetV2's block 0: group 32 on
1x32x112x112, stride 1, pads 1, with bias), with no activation, Relu6 (Clip) or the swish
(Sigmoid -> Mul), as a one-node ONNX model: ours (the profiled `NchwcConv` step and the whole
run) against onnxruntime's and OpenVINO's whole run, the three timed in alternating blocks in
one process, `--threads` each (ours: TF_POPEF_NUM_THREADS, set before the runtime is imported).
Prints per model the median of the rounds' medians and the step's GB/s (X in + Y out) and
GFLOP/s (2 per multiply-add).

    TF_POPEF_NUM_THREADS=2 PYTHONPATH=$PWD .venv/bin/python benchmarks/depthwise_step.py \
        [--threads 2] [--rounds 5] [--runs 100] [--out /tmp/dw] [--precision fp32|fp16] [--batch 1]
"""
import argparse
import collections
import os
import statistics
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The checkout whose runtime is timed comes first on PYTHONPATH; the peers' helpers are beside this file.
sys.path.append(os.path.join(ROOT, "benchmarks"))

C, HW, K = 32, 112, 3


def depthwise_model(batch: int, activation: str) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", TensorProto.FLOAT, [C, 1, K, K], (rng.standard_normal(C * K * K) * 0.3).tolist())
    b = helper.make_tensor("b", TensorProto.FLOAT, [C], (rng.standard_normal(C) * 0.1).tolist())
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["conv" if activation != "none" else "y"], name="dw",
                              group=C, kernel_shape=[K, K], pads=[1, 1, 1, 1], strides=[1, 1])]
    inits = [w, b]
    if activation == "relu6":
        inits += [helper.make_tensor("lo", TensorProto.FLOAT, [], [0.0]),
                  helper.make_tensor("hi", TensorProto.FLOAT, [], [6.0])]
        nodes.append(helper.make_node("Clip", ["conv", "lo", "hi"], ["y"], name="relu6"))
    elif activation == "swish":
        nodes += [helper.make_node("Sigmoid", ["conv"], ["sig"], name="sigmoid"),
                  helper.make_node("Mul", ["conv", "sig"], ["y"], name="swish")]
    graph = helper.make_graph(nodes, f"dw_{activation}",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, C, HW, HW])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, C, HW, HW])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--activations", nargs="+", default=["none", "relu6", "swish"])
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--out", default="/tmp/dw112")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    from benchmarks.compile_stages import compile_with_stages
    from tf_popef_op import runtime
    from tf_popef_op.runtime import ModelRunner, RuntimeConfig

    x = np.random.default_rng(1).standard_normal([args.batch, C, HW, HW]).astype(np.float32)
    contenders = collections.OrderedDict()
    for act in args.activations:
        model = depthwise_model(args.batch, act)
        onnx_path = os.path.join(args.out, f"dw_{act}_b{args.batch}.onnx")
        onnx.save(model, onnx_path)
        popef = os.path.join(args.out, f"dw_{act}_b{args.batch}_{args.precision}.popef")
        compile_with_stages(model, args.batch, args.precision)[0].save(popef)
        runner = ModelRunner(popef, RuntimeConfig(profile=True))
        feed = {"x": x.astype(runner.get_execute_inputs()[0].numpy_data_type())}
        contenders[("ours", act)] = ("ours", runner, feed)
        if not args.no_peers and args.precision == "fp32":
            from onnxruntime_peer import cpu_session
            from openvino_peer import compiled_model
            sess = cpu_session(model, args.threads)
            contenders[("onnxruntime", act)] = ("ort", sess, {"x": x})
            request = compiled_model(onnx_path, args.threads).create_infer_request()
            contenders[("openvino", act)] = ("ov", request, {"x": x})

    def run(kind, obj, feed):
        if kind == "ours":
            obj.execute(feed)
        elif kind == "ort":
            obj.run(None, feed)
        else:
            obj.infer(feed)

    walls = collections.defaultdict(list)
    steps = collections.defaultdict(lambda: collections.defaultdict(list))
    for _ in range(args.rounds):
        for key, (kind, obj, feed) in contenders.items():
            for _ in range(5):
                run(kind, obj, feed)
            samples = []
            per_step = collections.defaultdict(list)
            for _ in range(args.runs):
                if kind == "ours":
                    obj.reset_profile()
                t0 = time.perf_counter()
                run(kind, obj, feed)
                samples.append(time.perf_counter() - t0)
                if kind == "ours":
                    for e in obj.profile():
                        per_step[e["node"]].append(e["total_us"])
            walls[key].append(statistics.median(samples) * 1e6)
            for node, v in per_step.items():
                steps[key][node].append(statistics.median(v))
    macs = args.batch * C * HW * HW * K * K
    esize = 2 if args.precision == "fp16" else 4
    nbytes = 2 * args.batch * C * HW * HW * esize
    print(f"# depthwise 3x3 {C}@{HW} b{args.batch} {args.precision}, {args.threads} threads "
          f"(ours {runtime.num_threads()}), {args.rounds} rounds x {args.runs} runs, load {os.getloadavg()[0]:.2f}")
    for key, w in walls.items():
        line = f"{key[0]:>12} {key[1]:>6}: run {statistics.median(w):7.1f} us (rounds {min(w):.0f}-{max(w):.0f})"
        if key[0] == "ours":
            for node, v in steps[key].items():
                us = statistics.median(v)
                if "reorder" in node.lower() or us < 1:
                    line += f"; {node} {us:.0f}"
                else:
                    line += (f"; step {node} {us:.1f} us ({min(v):.0f}-{max(v):.0f}), {nbytes / us / 1e3:.1f} GB/s, "
                             f"{2 * macs / us / 1e3:.1f} GFLOP/s")
        print(line)


if __name__ == "__main__":
    main()
