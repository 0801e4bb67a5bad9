"""Export a PopEF as a TensorFlow SavedModel served through the PopefExecute op.

    python -m serving.export executable.popef models/<name>/<version>     (or: popef-export ...)
    serving.export.export_saved_model(popef_path, export_dir, ...)

The PopEF is copied into the SavedModel's `assets/` and every signature reads it through the
asset's path, so the SavedModel can be moved or copied anywhere. One signature per subgraph,
named after it (the `name:` of its `model_fusion` YAML entry, default `graph{i}`), with the
original models' input/output names as keys; `serving_default` is the first subgraph. A
single-model PopEF gets `serving_default` only. With dynamic batching (the default) the batch
dimension is None wherever the runtime can batch (see serving/popef_signatures.py).

Cross-request batching: by default the op lets the runtime pack rows of concurrent requests
into one compiled batch (waiting up to `timeout_ns` for them), the IPU-serving behaviour.
`cross_request_batching=False` (`--no_cross_request_batching`) keeps any batch size in the
signature but runs every request on its own, as a TF Serving model without a batcher does:
the signature zero-pads the request to whole compiled batches, so every batch the runtime
forms is full with rows of that one request (it never waits for, nor packs in, another
request's rows), and the padding rows are cut from the outputs. Use it when a server-side
batcher (`--enable_batching`) should be the only thing that merges requests.

Warm-up: the export writes `assets.extra/tf_serving_warmup_requests` (TF Serving's format, one
PredictRequest per signature with zero inputs of its declared dtypes and shapes, batch 1 for
batched signatures), which the model server replays before a version serves;
`warmup_requests=False` (`--no_warmup_requests`) leaves it out.

Loading needs the op: ``import tf_popef_op`` in Python (it registers the op with TensorFlow), or
the op linked into tensorflow_model_server (docs/tensorflow_serving.md).
"""
import argparse
import dataclasses
import logging
import os
import sys
from typing import Dict, List, Optional

from serving.popef_signatures import SubgraphSignature, read_signatures

DEFAULT_SIGNATURE = "serving_default"
DEFAULT_TIMEOUT_NS = 300_000  # time a batch waits for rows of other requests (the seeds' 300 us)

log = logging.getLogger(__name__)


@dataclasses.dataclass
class ExportResult:
    export_dir: str
    asset: str                                  # path of the PopEF copy inside the SavedModel
    signatures: Dict[str, SubgraphSignature]    # signature name -> its subgraph
    notes: List[str]                            # what the export decided and why (fixed shapes...)


def _pad_rows(tf, tensor, axis: int, rows):
    """`tensor` zero-padded along `axis` to `rows` rows."""
    extra = rows - tf.shape(tensor)[axis]
    paddings = [[0, 0]] * axis + [[0, extra]] + [[0, 0]] * (tensor.shape.rank - axis - 1)
    return tf.pad(tensor, paddings)


def _first_rows(tf, tensor, axis: int, rows):
    """The first `rows` rows of `tensor` along `axis`."""
    begin = [0] * tensor.shape.rank
    size = [-1] * axis + [rows] + [-1] * (tensor.shape.rank - axis - 1)
    return tf.slice(tensor, begin, tf.stack(size))


def _signature_function(tf, popef_asset, sig: SubgraphSignature, timeout_ns: int,
                        cross_request_batching: bool = True):
    """A tf.function taking the subgraph's inputs by their original names and returning a dict
    of its outputs by original name, through one PopefExecute call."""
    import tf_popef_op
    specs = [tf.TensorSpec(t.shape, tf.as_dtype(t.dtype), name=t.key) for t in sig.inputs]
    keys = [t.key for t in sig.inputs]
    per_request = sig.batched and not cross_request_batching
    axis, compiled = sig.batching_dim, sig.compiled_batch

    def run(*tensors):
        tensors = list(tensors)
        if per_request:   # whole compiled batches: the runtime runs them without waiting or packing
            rows = tf.shape(tensors[0])[axis]
            padded = tf.maximum((rows + compiled - 1) // compiled, 1) * compiled
            tensors = [_pad_rows(tf, t, axis, padded) for t in tensors]
        outputs = tf_popef_op.popef_execute(
            popef_asset.asset_path, tensors,
            input_names=[t.anchor for t in sig.inputs],
            output_names=[t.anchor for t in sig.outputs],
            output_dtypes=[tf.as_dtype(t.dtype) for t in sig.outputs],
            output_shapes=[t.shape for t in sig.outputs],
            batching_dim=sig.batching_dim, timeout_ns=timeout_ns, index=sig.index,
            name="popef_" + sig.name.replace("/", "_"))
        if per_request:
            outputs = [_first_rows(tf, o, axis, rows) for o in outputs]
        return {t.key: tf.identity(o, name=t.key) for t, o in zip(sig.outputs, outputs)}

    run.__name__ = "signature_" + "".join(c if c.isalnum() else "_" for c in sig.name)
    fn = tf.function(run, input_signature=specs, autograph=False)
    concrete = fn.get_concrete_function()
    got = [s.name for s in concrete.structured_input_signature[0]]
    if got != keys:
        raise RuntimeError(f"signature '{sig.name}': TensorFlow renamed its inputs {keys} to {got}")
    return concrete


def warmup_request(signature_name: str, sig: SubgraphSignature):
    """A PredictRequest for one signature: zeros of each input's dtype and shape (batch 1)."""
    import numpy as np
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2
    request = predict_pb2.PredictRequest()
    request.model_spec.signature_name = signature_name
    for tensor in sig.inputs:
        shape = [1 if d is None else d for d in tensor.shape]
        value = np.zeros(shape, tf.as_dtype(tensor.dtype).as_numpy_dtype)
        request.inputs[tensor.key].CopyFrom(tf.make_tensor_proto(value))
    return request


def export_saved_model(popef_path: str, export_dir: str, dynamic_batching: bool = True,
                       timeout_ns: int = DEFAULT_TIMEOUT_NS, overwrite: bool = False,
                       cross_request_batching: bool = True,
                       warmup_requests: bool = True) -> ExportResult:
    """Writes a SavedModel serving `popef_path` into `export_dir` (e.g. models/<name>/<version>).

    dynamic_batching: signatures accept any batch size along the PopEF's batch axis (padded to
        the compiled batch); False: compiled shapes only.
    timeout_ns: how long a batch waits for rows of other requests (RuntimeConfig.timeout_ns).
    cross_request_batching: the runtime packs rows of concurrent requests into shared batches;
        False: every request runs alone, zero-padded to whole compiled batches.
    warmup_requests: write one warm-up request per signature (assets.extra/).
    """
    popef_path = os.fspath(popef_path)
    if not os.path.isfile(popef_path):
        raise FileNotFoundError(f"{popef_path}: PopEF file not found")
    if os.path.exists(export_dir) and os.listdir(export_dir) and not overwrite:
        raise FileExistsError(f"{export_dir} exists and is not empty (pass overwrite=True / --overwrite)")
    import tensorflow as tf

    import tf_popef_op
    tf_popef_op.load_op_library()

    subgraphs = read_signatures(popef_path, dynamic_batching=dynamic_batching)
    notes = [s.fixed_reason for s in subgraphs if s.fixed_reason]
    for note in notes:
        log.warning("%s", note)

    module = tf.Module()
    module.popef = tf.saved_model.Asset(os.path.abspath(popef_path))
    by_name: Dict[str, SubgraphSignature] = {}
    functions = {}
    fused = len(subgraphs) > 1 or subgraphs[0].index >= 0
    for i, sig in enumerate(subgraphs):
        concrete = _signature_function(tf, module.popef, sig, timeout_ns, cross_request_batching)
        names = [DEFAULT_SIGNATURE] if i == 0 else []
        if fused and sig.name != DEFAULT_SIGNATURE:
            names.append(sig.name)
        for name in names:
            if name in functions:
                raise ValueError(f"{popef_path}: two subgraphs are named '{name}'")
            functions[name] = concrete
            by_name[name] = sig
    tf.saved_model.save(module, export_dir, signatures=functions)
    asset = os.path.join(export_dir, "assets", os.path.basename(popef_path))
    if not os.path.isfile(asset):
        raise RuntimeError(f"the SavedModel in {export_dir} has no copy of the PopEF at {asset}")
    if warmup_requests:
        from serving.model_server.warmup import write_warmup_file
        write_warmup_file(export_dir, [warmup_request(name, sig) for name, sig in by_name.items()])
    return ExportResult(export_dir=export_dir, asset=asset, signatures=by_name, notes=notes)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="popef-export", description=__doc__.split("\n\n")[0])
    parser.add_argument("popef", help="the PopEF file (e.g. executable.popef)")
    parser.add_argument("export_dir", help="where to write the SavedModel, e.g. models/<name>/<version>")
    parser.add_argument("--no_dynamic_batching", action="store_true",
                        help="signatures accept only the compiled batch size")
    parser.add_argument("--no_cross_request_batching", action="store_true",
                        help="run every request alone (zero-padded to the compiled batch) "
                             "instead of packing concurrent requests in the runtime")
    parser.add_argument("--timeout_ns", type=int, default=DEFAULT_TIMEOUT_NS,
                        help="time a batch waits for rows of other requests (default %(default)s)")
    parser.add_argument("--no_warmup_requests", action="store_true",
                        help="do not write assets.extra/tf_serving_warmup_requests")
    parser.add_argument("--overwrite", action="store_true", help="write into a non-empty export_dir")
    args = parser.parse_args(argv)
    try:
        result = export_saved_model(args.popef, args.export_dir, dynamic_batching=not args.no_dynamic_batching,
                                    timeout_ns=args.timeout_ns, overwrite=args.overwrite,
                                    cross_request_batching=not args.no_cross_request_batching,
                                    warmup_requests=not args.no_warmup_requests)
    except (OSError, ValueError) as e:
        print(f"popef-export: error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {result.export_dir} (PopEF asset {result.asset})")
    for name, sig in result.signatures.items():
        ins = ", ".join(f"{t.key}: {t.dtype}{t.shape}" for t in sig.inputs)
        outs = ", ".join(f"{t.key}: {t.dtype}{t.shape}" for t in sig.outputs)
        batching = f"dynamic batching on axis {sig.batching_dim}" if sig.batched else "fixed shapes"
        if sig.batched and args.no_cross_request_batching:
            batching += f", one request per execution (padded to {sig.compiled_batch} rows)"
        print(f"  signature '{name}' (subgraph {sig.name}): ({ins}) -> ({outs}); {batching}")
    for note in result.notes:
        print(f"  note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
