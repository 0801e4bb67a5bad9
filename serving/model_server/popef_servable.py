"""A bare-PopEF model version (`<base>/<model>/<version>/model.popef`, Triton's repository
layout) served by the runtime's ModelRunner directly: no TensorFlow in the request path.

Each subgraph of the PopEF is one signature (TF Serving Predict: `signature_name`) and one
KServe v2 model (`<model>/<subgraph>`; the plain model name is the first subgraph). Names,
dtypes, shapes and batching come from the runtime binding (`ModelRunner.subgraphs`, anchor
descriptors), never from the compiler: tensors keep the original model's names (a fused
PopEF's anchor alias `graph0/X` is served as `X`), and a subgraph the runtime batches has -1
(unknown) along its batch axis.

Requests go through `ModelRunner.execute_async`: the binding releases the GIL while it
queues and waits, so concurrent server threads overlap. With `dynamic_batching` in the
model's config.pbtxt the runtime packs rows of concurrent requests into shared batches
(RuntimeConfig.timeout_ns = max_queue_delay_microseconds); without it each request runs
alone, zero-padded to whole compiled batches, as Triton runs requests without a batcher.
`run_timed` also answers the runtime's timing of the request (`Future.timing()`: time in the
queue, gathering inputs, running, scattering outputs) for Triton's statistics.
"""
import dataclasses
import glob
import os
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from serving.model_server.errors import ServingError, invalid_argument, not_found
from serving.model_server.kserve_codec import datatype_of

PLATFORM = "popef"


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    name: str                 # the name clients use (the original model's tensor name)
    anchor: str               # the PopEF anchor the runtime knows
    dtype: np.dtype
    shape: Optional[tuple]    # -1 along the batch axis of a batched subgraph; None: any


@dataclasses.dataclass(frozen=True)
class Subgraph:
    name: str
    index: int
    inputs: List[TensorSpec]
    outputs: List[TensorSpec]
    batch_axis: int           # -1: exact compiled shapes only
    feeds: Dict[str, np.ndarray]   # extra inputs the runtime needs (a fused PopEF's `index`)
    batch_size: int = 0       # rows per execution along batch_axis


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """How the runner is configured (from config.pbtxt, see triton_model_config.py)."""
    batching: bool = True         # any number of rows along the batch axis
    pack_requests: bool = False   # the runtime packs rows of concurrent requests into batches
    timeout_ns: int = 0           # how long a packed batch waits for more rows
    max_batch_size: int = 0       # rows per request; 0: no limit beyond the runtime's
    device_id: int = -1           # emulated IPU to run on; -1: the runtime picks


def find_popef(path: str) -> str:
    """The one .popef file of a version directory."""
    found = sorted(glob.glob(os.path.join(glob.escape(path), "*.popef")))
    if len(found) != 1:
        raise not_found(f"{path}: a bare-PopEF version directory must hold exactly one .popef "
                        f"file, found {len(found)}")
    return found[0]


def _client_name(descriptor, program: str, fused: bool) -> str:
    name = descriptor.aliases[0] if descriptor.aliases else descriptor.name
    prefix = program + "/"
    return name[len(prefix):] if fused and name.startswith(prefix) else name


class PopefServable:
    """Construction is cheap; `load()` opens the runner (call once); afterwards every method
    is thread-safe."""

    platform = PLATFORM

    def __init__(self, name: str, version: int, path: str, options: RunOptions = RunOptions(),
                 local_copy=None):
        self.name = name
        self._local_copy = local_copy   # staging.LocalVersion of a non-local version, or None
        self.version = version
        self.path = path
        self.options = options
        self.runner = None
        self.subgraphs: Dict[str, Subgraph] = {}
        self.default = ""
        self._signature_defs = None
        self._runtime_error = Exception
        self.unloaded = False

    def load(self) -> None:
        from tf_popef_op import runtime
        config = runtime.RuntimeConfig()
        config.batching_dim = 0 if self.options.batching else runtime.BATCHING_OFF
        config.timeout_ns = self.options.timeout_ns
        config.device_id = self.options.device_id
        popef = find_popef(self.path)
        self._runtime_error = runtime.Error
        try:
            self.runner = runtime.ModelRunner(popef, config)
        except runtime.Error as error:
            raise ServingError(_grpc_code(error), f"{popef}: {error}") from None
        inputs = {d.name: d for d in self.runner.get_execute_inputs()}
        outputs = {d.name: d for d in self.runner.get_execute_outputs()}
        fused = "index" in inputs and inputs["index"].subgraph is None
        for info in self.runner.subgraphs:
            axis = info["run_batch_axis"] if info["batched"] and info["dynamic_batch"] else -1

            def spec(descriptor):
                shape = tuple(-1 if d == axis else s for d, s in enumerate(descriptor.shape))
                return TensorSpec(_client_name(descriptor, info["program"], fused),
                                  descriptor.name, np.dtype(descriptor.dtype), shape)
            feeds = {"index": np.array([info["index"]], np.int32)} if fused else {}
            self.subgraphs[info["name"]] = Subgraph(
                info["name"], info["index"], [spec(inputs[a]) for a in info["inputs"]],
                [spec(outputs[a]) for a in info["outputs"]], axis, feeds,
                info["run_batch_size"] if axis >= 0 else 0)
        if not self.subgraphs:
            raise invalid_argument(f"{popef}: the PopEF has no subgraphs")
        self.default = next(iter(self.subgraphs))

    def unload(self) -> None:
        """Requests that already hold this version finish; the runner closes with the last
        reference, so an unload never fails a request in flight (the runner keeps its PopEF
        mapped, so a local copy can be removed now)."""
        self.unloaded = True
        if self._local_copy is not None:
            self._local_copy.remove()

    # ---- one entry point per subgraph ----------------------------------------------------
    def subgraph(self, signature_name: str) -> Subgraph:
        key = signature_name or self.default
        found = self.subgraphs.get(key)
        if found is None:
            raise invalid_argument(f'Serving signature key "{key}" not found (subgraphs of '
                                   f"model '{self.name}': {', '.join(self.subgraphs)})")
        return found

    def run(self, signature_name: str, inputs: Dict[str, np.ndarray],
            outputs: Optional[Sequence[str]] = None) -> Dict[str, np.ndarray]:
        """Runs one subgraph; `outputs` limits what is returned (all by default)."""
        return self.run_timed(signature_name, inputs, outputs)[0]

    def run_timed(self, signature_name: str, inputs: Dict[str, np.ndarray],
                  outputs: Optional[Sequence[str]] = None) -> Tuple[Dict[str, np.ndarray], dict]:
        """run(), and where the request's time went in the runtime (`Future.timing()`: queue
        and compute nanoseconds)."""
        subgraph = self.subgraph(signature_name)
        check_inputs(self.name, subgraph, inputs, self.options.max_batch_size)
        rows = alone = None
        if not self.options.pack_requests and subgraph.batch_axis >= 0:
            # Whole compiled batches run as they are: the request executes alone.
            rows = next(iter(inputs.values())).shape[subgraph.batch_axis]
            alone = -(-rows // subgraph.batch_size) * subgraph.batch_size
        feeds = dict(subgraph.feeds)
        for spec in subgraph.inputs:
            value = inputs[spec.name]
            feeds[spec.anchor] = value if rows == alone else _pad(value, subgraph.batch_axis,
                                                                   alone)
        try:
            future = self.runner.execute_async(feeds)
            result = future.result()
        except self._runtime_error as error:
            raise ServingError(_grpc_code(error), str(error)) from None
        timing = future.timing()
        wanted = subgraph.outputs if outputs is None else [
            s for s in subgraph.outputs if s.name in outputs]
        if rows == alone:
            return {s.name: result[s.anchor] for s in wanted}, timing
        cut = (slice(None),) * subgraph.batch_axis + (slice(0, rows),)
        return {s.name: result[s.anchor][cut] if s.shape[subgraph.batch_axis] == -1
                else result[s.anchor] for s in wanted}, timing

    # ---- TF Serving view (Predict, GetModelMetadata, REST :predict) ----------------------
    @property
    def signature_defs(self):
        if self._signature_defs is None:   # built once; a race only builds it twice
            self._signature_defs = {name: _signature_def(sg) for name, sg in self.subgraphs.items()}
        return self._signature_defs

    def signature_def(self, signature_name: str):
        subgraph = self.subgraph(signature_name)
        return subgraph.name, self.signature_defs[subgraph.name]

    def input_specs(self, signature_name: str):
        import tensorflow as tf
        subgraph = self.subgraph(signature_name)
        return {s.name: tf.TensorSpec([None if d < 0 else d for d in s.shape], s.dtype, s.name)
                for s in subgraph.inputs}


def _pad(value: np.ndarray, axis: int, rows: int) -> np.ndarray:
    shape = list(value.shape)
    shape[axis] = rows
    padded = np.zeros(shape, value.dtype)
    index = [slice(None)] * value.ndim
    index[axis] = slice(0, value.shape[axis])
    padded[tuple(index)] = value
    return padded


def check_inputs(model: str, subgraph: Subgraph, inputs: Dict[str, np.ndarray],
                 max_batch_size: int = 0) -> None:
    """INVALID_ARGUMENT naming the tensor unless the inputs match the subgraph's names,
    dtypes and shapes (before the request reaches the runtime, whose messages name anchors)."""
    expected = {s.name: s for s in subgraph.inputs}
    if len(inputs) != len(expected) or not all(n in expected for n in inputs):
        missing = sorted(set(expected) - set(inputs))
        extra = sorted(set(inputs) - set(expected))
        parts = []
        if missing:
            parts.append(f"missing input(s) {', '.join(repr(n) for n in missing)}")
        if extra:
            parts.append(f"unknown input(s) {', '.join(repr(n) for n in extra)}")
        raise invalid_argument(f"model '{model}' subgraph '{subgraph.name}': "
                               f"{'; '.join(parts)} (expects {', '.join(expected)})")
    for name, value in inputs.items():
        spec = expected[name]
        if value.dtype != spec.dtype and not (spec.dtype.kind == "O" and
                                              value.dtype.kind in "OSU"):
            raise invalid_argument(f"input '{name}' of model '{model}' has datatype "
                                   f"{_datatype(value.dtype)} but the model expects "
                                   f"{_datatype(spec.dtype)}")
        if spec.shape is not None and (value.ndim != len(spec.shape) or any(
                d >= 0 and d != v for d, v in zip(spec.shape, value.shape))):
            raise invalid_argument(
                f"input '{name}' of model '{model}' has shape {list(value.shape)} but the model "
                f"expects {list(spec.shape)}")
        if max_batch_size and subgraph.batch_axis >= 0 and \
                value.shape[subgraph.batch_axis] > max_batch_size:
            raise invalid_argument(
                f"input '{name}' of model '{model}' has {value.shape[subgraph.batch_axis]} rows, "
                f"more than its max_batch_size {max_batch_size}")


def _datatype(dtype) -> str:
    try:
        return datatype_of(dtype)
    except ServingError:
        return str(dtype)


def _grpc_code(error):
    """The gRPC status of a runtime error (its `code` is the canonical code's name)."""
    import grpc
    return getattr(grpc.StatusCode, error.code, grpc.StatusCode.INTERNAL)


def _signature_def(subgraph: Subgraph):
    import tensorflow as tf
    from tensorflow.core.protobuf import meta_graph_pb2

    def info(spec, into):
        into.name = spec.anchor
        into.dtype = tf.as_dtype(spec.dtype).as_datatype_enum
        for d in spec.shape:
            into.tensor_shape.dim.add().size = d
    signature = meta_graph_pb2.SignatureDef(method_name="tensorflow/serving/predict")
    for spec in subgraph.inputs:
        info(spec, signature.inputs[spec.name])
    for spec in subgraph.outputs:
        info(spec, signature.outputs[spec.name])
    return signature
