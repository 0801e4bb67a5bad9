"""Triton's per-model `config.pbtxt` (next to the version folders) mapped onto the runtime's
options for a bare-PopEF model, parsed with the ModelConfig class generated from Triton's own
model_config.proto.

What maps:
- `max_batch_size: 0` turns the runtime's batching off (requests must have the exact compiled
  shapes); `N > 0` keeps it on and refuses requests of more than N rows.
- `dynamic_batching { max_queue_delay_microseconds }` lets the runtime pack rows of concurrent
  requests into shared batches, holding a batch open that long for more rows
  (RuntimeConfig.timeout_ns). Without `dynamic_batching` every request runs alone (zero-padded
  to whole compiled batches), like Triton's default scheduler; so does a model without a
  config.pbtxt.
- `instance_group { gpus: [n] }` picks the emulated IPU the model runs on
  (RuntimeConfig.device_id); one runner serves a model version, so at most one device may be
  listed. `count` and `preferred_batch_size` are performance hints (the runtime overlaps
  concurrent requests and batches up to the PopEF's compiled batch size): accepted, logged.
Settings that would change results (`sequence_batching`, `ensemble_scheduling`, a `platform`
or `backend` other than PopEF's, inputs/outputs that contradict the PopEF) fail the load with
a message naming the file and the field.
"""
import logging

from google.protobuf import text_format

from serving.model_server.errors import invalid_argument
from serving.model_server.kserve_codec import datatype_of
from serving.model_server.popef_servable import PLATFORM, RunOptions
from serving.model_server.version_source import MODEL_CONFIG_FILE, join

log = logging.getLogger("popef_model_server")
CONFIG_FILE = MODEL_CONFIG_FILE
_ACCEPTED_BACKENDS = ("", PLATFORM)


def read_model_config(model_dir: str):
    """The ModelConfig of `<model_dir>/config.pbtxt`, or None when there is none."""
    from serving.protos.triton import model_config_pb2
    import tensorflow as tf
    path = join(model_dir, CONFIG_FILE)
    if not tf.io.gfile.exists(path):
        return None
    config = model_config_pb2.ModelConfig()
    with tf.io.gfile.GFile(path, "r") as handle:
        try:
            text_format.Parse(handle.read(), config)
        except text_format.ParseError as error:
            raise invalid_argument(f"{path}: {error}") from None
    return config


def run_options(config, path: str = CONFIG_FILE) -> RunOptions:
    """RunOptions for a model's ModelConfig (None: the defaults)."""
    if config is None:
        return RunOptions()
    for field in ("platform", "backend"):
        value = getattr(config, field)
        if value not in _ACCEPTED_BACKENDS:
            raise invalid_argument(f"{path}: {field} '{value}' cannot serve a PopEF (use "
                                   f"'{PLATFORM}' or leave it unset)")
    scheduling = config.WhichOneof("scheduling_choice")
    if scheduling not in (None, "dynamic_batching"):
        raise invalid_argument(f"{path}: {scheduling} is not supported for PopEF models "
                               "(only dynamic_batching)")
    if config.max_batch_size < 0:
        raise invalid_argument(f"{path}: max_batch_size must be >= 0, got "
                               f"{config.max_batch_size}")
    timeout_ns = 0
    if scheduling == "dynamic_batching":
        batching = config.dynamic_batching
        timeout_ns = batching.max_queue_delay_microseconds * 1000
        if batching.preferred_batch_size:
            log.info("%s: preferred_batch_size %s is a hint; the runtime batches up to the "
                     "PopEF's compiled batch size", path, list(batching.preferred_batch_size))
    for group in config.instance_group:
        if group.count > 1:
            log.info("%s: instance_group count %d: one runner serves the model; the runtime "
                     "overlaps concurrent requests itself", path, group.count)
    devices = sorted({d for group in config.instance_group for d in group.gpus})
    if len(devices) > 1:
        raise invalid_argument(f"{path}: instance_group lists devices {devices}; one runner "
                               "serves a model version, so list at most one")
    return RunOptions(batching=config.max_batch_size != 0,
                      pack_requests=scheduling == "dynamic_batching", timeout_ns=timeout_ns,
                      max_batch_size=config.max_batch_size,
                      device_id=devices[0] if devices else -1)


def check_against(config, servable, path: str = CONFIG_FILE) -> None:
    """Fails when config.pbtxt declares inputs/outputs the loaded PopEF does not have."""
    if config is None:
        return
    from serving.protos.triton import model_config_pb2
    specs = {}
    for subgraph in servable.subgraphs.values():
        for spec in subgraph.inputs + subgraph.outputs:
            specs[spec.name] = spec
    for kind, declared in (("input", config.input), ("output", config.output)):
        for tensor in declared:
            spec = specs.get(tensor.name)
            if spec is None:
                raise invalid_argument(f"{path}: {kind} '{tensor.name}' is not a tensor of "
                                       f"{servable.path} (it has {', '.join(specs)})")
            datatype = model_config_pb2.DataType.Name(tensor.data_type)[len("TYPE_"):]
            expected = datatype_of(spec.dtype)
            if tensor.data_type and datatype.replace("STRING", "BYTES") != expected:
                raise invalid_argument(f"{path}: {kind} '{tensor.name}' is declared {datatype} "
                                       f"but the PopEF has {expected}")
