"""One model run by each implementation bench_models.py compares, as zero-argument calls that
do one inference on a fixed input and leave the outputs where `outputs()` finds them.

- ModelRunner: the compiled PopEF, synchronous `execute` into preallocated output arrays
  (batching off, default RuntimeConfig).
- onnxruntime: the same model in standard ONNX (model_suite.standard_onnx), CPU provider, threads =
  ours, inter-op 1, sequential execution, outputs bound to preallocated arrays (IOBinding), so
  neither side allocates on the timed path.
- OpenVINO: the same standard ONNX file through OpenVINO's ONNX reader on its CPU plugin
  (openvino_peer.py: latency hint, one stream, threads = ours, precision pinned, thread pinning
  as asked), the input tensor sharing the fixed input's memory.
- TensorFlow: the Keras model as a tf.function (intra-op threads = ours, inter-op 1).
"""
import dataclasses
from typing import Callable, Dict

import numpy as np


@dataclasses.dataclass
class Contender:
    name: str
    call: Callable[[], object]
    outputs: Callable[[], Dict[str, np.ndarray]]  # outputs of the last call, as float32


def modelrunner(name: str, executable, x: np.ndarray) -> Contender:
    from tf_popef_op.runtime import ModelRunner, RuntimeConfig
    runner = ModelRunner(executable, RuntimeConfig())
    (anchor,) = runner.get_execute_inputs()
    feed = {anchor.name: np.ascontiguousarray(x.astype(anchor.numpy_data_type()))}
    outs = {o.name: np.zeros(o.shape, o.numpy_data_type()) for o in runner.get_execute_outputs()}
    return Contender(name, lambda: runner.execute(feed, outs),
                     lambda: {k: v.astype(np.float32) for k, v in outs.items()})


def onnxruntime_session(name: str, model, x: np.ndarray, threads: int, optimization_level=None,
                        spinning: bool = False) -> Contender:
    from onnxruntime_peer import cpu_session
    session = cpu_session(model, threads, optimization_level, spinning=spinning)
    (inp,) = session.get_inputs()
    feed = np.ascontiguousarray(x.astype(_ORT_TYPES[inp.type]))
    binding = session.io_binding()
    binding.bind_cpu_input(inp.name, feed)
    outs = {}
    for o in session.get_outputs():
        outs[o.name] = np.zeros(o.shape, _ORT_TYPES[o.type])
        binding.bind_output(o.name, "cpu", 0, outs[o.name].dtype, outs[o.name].shape, outs[o.name].ctypes.data)
    def call(_bound=(feed, outs)):  # the binding holds raw pointers: the call keeps the arrays alive
        session.run_with_iobinding(binding)

    return Contender(name, call, lambda: {k: v.astype(np.float32) for k, v in outs.items()})


def openvino_model(name: str, onnx_path: str, x: np.ndarray, threads: int, precision: str = "fp32",
                   pinning=None) -> Contender:
    import onnx
    import openvino as ov
    from openvino_peer import compiled_model
    compiled = compiled_model(onnx_path, threads, precision, pinning=pinning)
    request = compiled.create_infer_request()
    (inp,) = compiled.inputs
    feed = np.ascontiguousarray(x.astype(inp.get_element_type().to_dtype()))
    request.set_input_tensor(ov.Tensor(feed, shared_memory=True))
    wanted = {o.name for o in onnx.load(onnx_path, load_external_data=False).graph.output}
    names = [next((n for n in sorted(o.get_names()) if n in wanted), sorted(o.get_names())[0]) for o in compiled.outputs]

    def call(_feed=feed):  # the shared tensor points into `feed`: the call keeps it alive
        request.infer()

    def outputs():
        return {n: request.get_output_tensor(i).data.astype(np.float32) for i, n in enumerate(names)}

    contender = Contender(name, call, outputs)
    contender.compiled = compiled  # effective_settings() for the report
    return contender


_ORT_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int32)": np.int32,
              "tensor(int64)": np.int64}


def tensorflow_function(name: str, keras_model, x: np.ndarray, onnx_output_names) -> Contender:
    import tensorflow as tf
    fn = tf.function(lambda t: keras_model(t, training=False))
    feed = tf.constant(x)
    last = {}

    def call():
        last["out"] = fn(feed)

    def outputs():
        out = last["out"]
        if isinstance(out, dict):
            return {k: v.numpy().astype(np.float32) for k, v in out.items()}
        (only,) = onnx_output_names  # a single-output Keras model: its one ONNX output
        return {only: out.numpy().astype(np.float32)}

    return Contender(name, call, outputs)
