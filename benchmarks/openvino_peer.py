"""The OpenVINO model every benchmark times against as the second peer: the standard ONNX file
(model_suite.standard_onnx) read by OpenVINO's own ONNX front end, compiled for its CPU plugin
with the latency hint, one stream and `threads` inference threads (the emulator's pool size),
and the inference precision pinned (fp32 unless asked): left to its defaults the CPU plugin may
pick bf16 on CPUs that have it, which would not be the fp32 model."""
from typing import Dict

PRECISIONS = {"fp32": "f32", "fp16": "f16", "bf16": "bf16"}


def cpu_config(threads: int, precision: str = "fp32", profile: bool = False, pinning=None) -> Dict[str, object]:
    """pinning: None leaves ENABLE_CPU_PINNING to the latency hint (on); False keeps OpenVINO's
    threads free to move, as the interleaved timing wants of every contender: a pinned thread
    waits for its core while another contender's or process's thread holds it."""
    config = {"PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": "1", "INFERENCE_NUM_THREADS": str(threads),
              "INFERENCE_PRECISION_HINT": PRECISIONS[precision], "PERF_COUNT": "YES" if profile else "NO"}
    if pinning is not None:
        config["ENABLE_CPU_PINNING"] = "YES" if pinning else "NO"
    return config


def compiled_model(onnx_path: str, threads: int, precision: str = "fp32", profile: bool = False, pinning=None):
    """An openvino.CompiledModel. OpenVINO is imported here: the rest of the benchmark helpers
    (and their unit tests) do not need it installed."""
    import openvino as ov
    core = ov.Core()
    return core.compile_model(core.read_model(onnx_path), "CPU", cpu_config(threads, precision, profile, pinning))


def effective_settings(compiled) -> Dict[str, str]:
    """What the plugin actually runs with (the hints resolve to these): stated in the report."""
    out = {}
    for key in ("PERFORMANCE_HINT", "NUM_STREAMS", "INFERENCE_NUM_THREADS", "INFERENCE_PRECISION_HINT",
                "ENABLE_HYPER_THREADING", "ENABLE_CPU_PINNING", "SCHEDULING_CORE_TYPE"):
        try:
            value = compiled.get_property(key)
            out[key] = value.get_type_name() if hasattr(value, "get_type_name") else str(value)
        except RuntimeError:  # a property this plugin version does not report
            pass
    return out
