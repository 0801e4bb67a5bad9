"""Export a PopEF as a TensorFlow SavedModel served through the PopefExecute op.

    python -m serving.export executable.popef models/<name>/<version>     (or: popef-export ...)
    serving.export.export_saved_model(popef_path, export_dir, ...)

The PopEF is copied into the SavedModel's `assets/` and every signature reads it through the
asset's path, so the SavedModel can be moved or copied anywhere. One signature per subgraph,
named after it (the `name:` of its `model_fusion` YAML entry, default `graph{i}`), with the
original models' input/output names as keys; `serving_default` is the first subgraph. A
single-model PopEF gets `serving_default` only. With dynamic batching (the default) the batch
dimension is None wherever the runtime can batch (see serving/popef_signatures.py).

Loading needs the op library first: ``tf_popef_op.load_op_library()`` in Python, or the op
linked into tensorflow_model_server (docs/tensorflow_serving.md).
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


def _signature_function(tf, popef_asset, sig: SubgraphSignature, timeout_ns: int):
    """A tf.function taking the subgraph's inputs by their original names and returning a dict
    of its outputs by original name, through one PopefExecute call."""
    import tf_popef_op
    specs = [tf.TensorSpec(t.shape, tf.as_dtype(t.dtype), name=t.key) for t in sig.inputs]
    keys = [t.key for t in sig.inputs]

    def run(*tensors):
        outputs = tf_popef_op.popef_execute(
            popef_asset.asset_path, list(tensors),
            input_names=[t.anchor for t in sig.inputs],
            output_names=[t.anchor for t in sig.outputs],
            output_dtypes=[tf.as_dtype(t.dtype) for t in sig.outputs],
            output_shapes=[t.shape for t in sig.outputs],
            batching_dim=sig.batching_dim, timeout_ns=timeout_ns, index=sig.index,
            name="popef_" + sig.name.replace("/", "_"))
        return {t.key: tf.identity(o, name=t.key) for t, o in zip(sig.outputs, outputs)}

    run.__name__ = "signature_" + "".join(c if c.isalnum() else "_" for c in sig.name)
    fn = tf.function(run, input_signature=specs, autograph=False)
    concrete = fn.get_concrete_function()
    got = [s.name for s in concrete.structured_input_signature[0]]
    if got != keys:
        raise RuntimeError(f"signature '{sig.name}': TensorFlow renamed its inputs {keys} to {got}")
    return concrete


def export_saved_model(popef_path: str, export_dir: str, dynamic_batching: bool = True,
                       timeout_ns: int = DEFAULT_TIMEOUT_NS, overwrite: bool = False) -> ExportResult:
    """Writes a SavedModel serving `popef_path` into `export_dir` (e.g. models/<name>/<version>).

    dynamic_batching: signatures accept any batch size along the PopEF's batch axis (padded to
        the compiled batch, packed across concurrent requests); False: compiled shapes only.
    timeout_ns: how long a batch waits for rows of other requests (RuntimeConfig.timeout_ns).
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
        concrete = _signature_function(tf, module.popef, sig, timeout_ns)
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
    return ExportResult(export_dir=export_dir, asset=asset, signatures=by_name, notes=notes)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="popef-export", description=__doc__.split("\n\n")[0])
    parser.add_argument("popef", help="the PopEF file (e.g. executable.popef)")
    parser.add_argument("export_dir", help="where to write the SavedModel, e.g. models/<name>/<version>")
    parser.add_argument("--no_dynamic_batching", action="store_true",
                        help="signatures accept only the compiled batch size")
    parser.add_argument("--timeout_ns", type=int, default=DEFAULT_TIMEOUT_NS,
                        help="time a batch waits for rows of other requests (default %(default)s)")
    parser.add_argument("--overwrite", action="store_true", help="write into a non-empty export_dir")
    args = parser.parse_args(argv)
    try:
        result = export_saved_model(args.popef, args.export_dir, dynamic_batching=not args.no_dynamic_batching,
                                    timeout_ns=args.timeout_ns, overwrite=args.overwrite)
    except (OSError, ValueError) as e:
        print(f"popef-export: error: {e}", file=sys.stderr)
        return 1
    print(f"wrote {result.export_dir} (PopEF asset {result.asset})")
    for name, sig in result.signatures.items():
        ins = ", ".join(f"{t.key}: {t.dtype}{t.shape}" for t in sig.inputs)
        outs = ", ".join(f"{t.key}: {t.dtype}{t.shape}" for t in sig.outputs)
        batching = f"dynamic batching on axis {sig.batching_dim}" if sig.batched else "fixed shapes"
        print(f"  signature '{name}' (subgraph {sig.name}): ({ins}) -> ({outs}); {batching}")
    for note in result.notes:
        print(f"  note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
