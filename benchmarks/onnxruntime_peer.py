"""The onnxruntime session every benchmark times against: CPU provider, `threads` intra-op
threads (the emulator's pool size), inter-op 1, sequential execution, on a copy of the model with
ir_version capped at 8 (the newest onnxruntime 1.31 accepts)."""
import copy

import onnxruntime as ort


def cpu_session(model, threads: int, optimization_level=None, profile_prefix=None,
                spinning: bool = False) -> ort.InferenceSession:
    oracle = copy.deepcopy(model)
    oracle.ir_version = min(oracle.ir_version, 8)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # onnxruntime's idle intra-op workers spin, long enough (well over the interleaved timing's
    # 5 ms gap) to take a core from whatever runs next in the same process: ResNet50 b1 through
    # ModelRunner measured 99 ms after an onnxruntime call with spinning, 69 ms without, while
    # onnxruntime itself took 45.4 vs 44.2 ms. Off, so interleaved peers do not slow each other.
    # spinning=True is onnxruntime's default, for runs that do not interleave (block timing).
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    if optimization_level is not None:
        options.graph_optimization_level = optimization_level
    if profile_prefix is not None:  # onnxruntime's per-node profiler (benchmarks/compare_layers.py)
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    return ort.InferenceSession(oracle.SerializeToString(), options, providers=["CPUExecutionProvider"])
