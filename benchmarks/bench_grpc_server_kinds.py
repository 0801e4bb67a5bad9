"""Which Python gRPC server to put in front of the runtime: the same v2 ModelInfer handler
(serving/model_server/kserve_grpc.py on a bare PopEF) behind grpcio's thread-pool server
(what the model server uses), grpcio's asyncio server with the handler on a thread pool, and
the asyncio server running the handler on its event loop. Each server is its own process.

Measured: p50/p90 of one-row ModelInfer and of the empty ServerLive RPC (gRPC's own cost),
interleaved call by call; and throughput of 16 closed-loop clients (threads of this process
on one channel). The handler's own Python work is timed in process for reference.

    .venv/bin/python benchmarks/bench_grpc_server_kinds.py [--iterations 2000]
"""
import argparse
import asyncio
import concurrent.futures
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
SIZES = (64, 256, 256, 16)
KINDS = ("sync thread pool", "asyncio + thread pool", "asyncio, handler on the loop")
INFER = "/inference.GRPCInferenceService/ModelInfer"
LIVE = "/inference.GRPCInferenceService/ServerLive"


def _service(popef_dir):
    """The model server's v2 servicer over one bare PopEF (no ServerCore: one model)."""
    from serving.model_server.admission import Admission
    from serving.model_server.kserve_grpc import InferenceService
    from serving.model_server.kserve_service import KServeV2
    from serving.model_server.popef_servable import PopefServable
    servable = PopefServable("mlp", 1, popef_dir)
    servable.load()

    class OneModel:
        def model_names(self):
            return ["mlp"]

        def resolve(self, spec):
            return servable

    class Core:
        manager = OneModel()
        admission = Admission(0, 0)   # unbounded, but on the path as in the server
    return InferenceService(KServeV2(Core()))


def serve(kind: str, popef_dir: str, port: int) -> None:
    import grpc
    from serving.protos.triton import grpc_service_pb2_grpc as pb_grpc
    service = _service(popef_dir)
    if kind == KINDS[0]:
        server = grpc.server(concurrent.futures.ThreadPoolExecutor(16))
        pb_grpc.add_GRPCInferenceServiceServicer_to_server(service, server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        server.start()
        print("ready", flush=True)
        server.wait_for_termination()
        return
    pool = concurrent.futures.ThreadPoolExecutor(16)

    class SyncView:
        """An aio context as the sync handlers read it (`is_active` is `not done()` there)."""

        def __init__(self, context):
            self._context = context

        def is_active(self):
            return not self._context.done()

        def __getattr__(self, name):
            return getattr(self._context, name)

    class AsyncService(pb_grpc.GRPCInferenceServiceServicer):
        async def ServerLive(self, request, context):
            return service.ServerLive(request, SyncView(context))

        async def ModelInfer(self, request, context):
            if kind == KINDS[2]:
                return service.ModelInfer(request, SyncView(context))
            return await asyncio.get_running_loop().run_in_executor(
                pool, service.ModelInfer, request, SyncView(context))

    async def main():
        server = grpc.aio.server()
        pb_grpc.add_GRPCInferenceServiceServicer_to_server(AsyncService(), server)
        server.add_insecure_port(f"127.0.0.1:{port}")
        await server.start()
        print("ready", flush=True)
        await server.wait_for_termination()
    asyncio.run(main())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--serve", nargs=3, metavar=("KIND", "POPEF_DIR", "PORT"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve(args.serve[0], args.serve[1], int(args.serve[2]))

    import grpc
    from benchmarks.interleaved_timing import interleaved, summary
    from benchmarks.load_generator import summarize, thread_load
    from benchmarks.mlp_model import build_mlp
    from compiler import Compiler
    from serving.protos.triton import grpc_service_pb2 as pb
    sys.path.insert(0, os.path.join(ROOT, "tests", "serving"))
    from serving_harness import free_port

    x = np.random.default_rng(0).standard_normal((1, SIZES[0])).astype(np.float32)
    request = pb.ModelInferRequest(model_name="mlp")
    request.inputs.add(name="X", datatype="FP32", shape=[1, SIZES[0]])
    request.raw_input_contents.append(x.tobytes())
    infer_bytes = request.SerializeToString()
    live_bytes = pb.ServerLiveRequest().SerializeToString()
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "1"))
        Compiler.compile(build_mlp(1, list(SIZES)).SerializeToString(), ["Y"]).save(
            os.path.join(root, "1", "model.popef"))
        handler = _service(os.path.join(root, "1"))
        in_process = interleaved({"handler": lambda: handler._infer(
            pb.ModelInferRequest.FromString(infer_bytes)).SerializeToString()},
            warmup=200, min_iters=args.iterations, max_iters=args.iterations, budget_s=0,
            gap_s=0)
        servers, calls = [], {}
        try:
            for kind in KINDS:
                port = free_port()
                process = subprocess.Popen(
                    [sys.executable, __file__, "--serve", kind, os.path.join(root, "1"),
                     str(port)], stdout=subprocess.PIPE, env=dict(
                        os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="2"))
                servers.append(process)
                assert process.stdout.readline().strip() == b"ready", kind
                channel = grpc.insecure_channel(f"127.0.0.1:{port}")
                infer, live = channel.unary_unary(INFER), channel.unary_unary(LIVE)
                calls[f"{kind}: ModelInfer"] = lambda infer=infer: infer(infer_bytes, timeout=60)
                calls[f"{kind}: ServerLive"] = lambda live=live: live(live_bytes, timeout=60)
            latency = {name: summary(s) for name, s in interleaved(
                calls, warmup=200, min_iters=args.iterations, max_iters=args.iterations,
                budget_s=0, gap_s=0.001).items()}
            throughput = {kind: max(summarize(*thread_load(calls[f"{kind}: ModelInfer"], 16,
                                                           args.requests))[0]
                                    for _ in range(2)) for kind in KINDS}
        finally:
            for process in servers:
                process.kill()
    print(f"\nMLP {list(SIZES)} at batch 1, one-row requests; {os.cpu_count()} cores, load "
          f"average {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M')}\n")
    print(f"v2 ModelInfer handler in process (parse, decode, run, encode, serialize): p50 "
          f"{summary(in_process['handler'])['median_ms'] * 1e3:.0f} us\n")
    print("| server | RPC | p50 ms | p90 ms | 16 clients req/s |")
    print("|---|---|---:|---:|---:|")
    for name, row in latency.items():
        kind, rpc = name.split(": ")
        rate = f"{throughput[kind]:.0f}" if rpc == "ModelInfer" else ""
        print(f"| {kind} | {rpc} | {row['median_ms']:.3f} | {row['p90_ms']:.3f} | {rate} |")


if __name__ == "__main__":
    main()
