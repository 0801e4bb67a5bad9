"""popef-client: call a model server (this one or TF Serving) from the shell.

    popef-client --grpc localhost:8500 predict m --input x='[[1, 2]]'
    popef-client --rest http://localhost:8501 predict m --instances '[[1, 2]]'
    popef-client --grpc localhost:8500 predict m --input x=@batch.npy --signature two_io
    popef-client --grpc localhost:8500 status m
    popef-client --rest http://localhost:8501 metadata m
    popef-client --grpc localhost:8500 reload models.config

Answers are printed as JSON; a server error prints its code and message to stderr, exit 1.
"""
import argparse
import base64
import json
import sys

import numpy as np


def _parser():
    parser = argparse.ArgumentParser(prog="popef-client", description=__doc__.split("\n")[0],
                                     allow_abbrev=False)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--grpc", metavar="HOST:PORT", help="gRPC PredictionService address")
    where.add_argument("--rest", metavar="URL", help="REST base URL, e.g. http://host:8501")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per call")
    commands = parser.add_subparsers(dest="command", required=True)

    def model_command(name, help_text):
        command = commands.add_parser(name, help=help_text)
        command.add_argument("model")
        version = command.add_mutually_exclusive_group()
        version.add_argument("--version", type=int)
        version.add_argument("--label")
        return command

    predict = model_command("predict", "send a PredictRequest")
    predict.add_argument("--signature", default="")
    predict.add_argument("--input", action="append", default=[], metavar="NAME=VALUE",
                         help="an input as JSON, or @file.npy; repeat per input")
    predict.add_argument("--instances", metavar="JSON",
                         help="REST row format (a JSON list); gRPC: the single input's rows")
    predict.add_argument("--output_filter", action="append", default=[])
    model_command("status", "GetModelStatus")
    model_command("metadata", "GetModelMetadata (signatures)")
    reload = commands.add_parser("reload", help="HandleReloadConfigRequest (gRPC)")
    reload.add_argument("config_file", help="text-format ModelServerConfig")
    return parser


def _read_inputs(specs):
    inputs = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name:
            raise SystemExit(f"popef-client: --input expects NAME=VALUE, got {spec!r}")
        inputs[name] = np.load(value[1:], allow_pickle=False) if value.startswith("@") \
            else json.loads(value)
    return inputs


def _json_value(value: np.ndarray):
    if value.dtype == object:
        def leaf(v):
            try:
                return v.decode("utf-8")
            except UnicodeDecodeError:
                return {"b64": base64.b64encode(v).decode("ascii")}
        return np.vectorize(leaf, otypes=[object])(value).tolist() if value.ndim else leaf(
            value.item())
    return value.tolist()


def _grpc(args):
    from google.protobuf import json_format
    import tensorflow as tf
    from serving.client.grpc_client import GrpcClient
    with GrpcClient(args.grpc, args.timeout) as client:
        where = dict(version=args.version, label=args.label) if args.command != "reload" else {}
        if args.command == "status":
            return json_format.MessageToDict(client.status(args.model, **where),
                                             preserving_proto_field_name=True)
        if args.command == "metadata":
            return json_format.MessageToDict(client.metadata(args.model, **where),
                                             preserving_proto_field_name=True)
        if args.command == "reload":
            with open(args.config_file, encoding="utf-8") as handle:
                client.reload_config(handle.read())
            return {"status": "OK"}
        signatures = client.metadata(args.model, **where).signature_def
        key = args.signature or "serving_default"
        if key not in signatures:
            raise SystemExit(f"popef-client: model {args.model} has no signature {key!r}; it has "
                             f"{sorted(signatures)}")
        declared = signatures[key].inputs
        raw = _read_inputs(args.input)
        if args.instances is not None:
            if len(declared) != 1:
                raise SystemExit("popef-client: --instances needs a single-input signature; "
                                 "use --input NAME=VALUE per input")
            raw[next(iter(declared))] = json.loads(args.instances)
        inputs = {}
        for name, value in raw.items():
            if name not in declared:
                raise SystemExit(f"popef-client: signature {key!r} has no input {name!r}; it "
                                 f"has {sorted(declared)}")
            dtype = tf.as_dtype(declared[name].dtype)
            inputs[name] = (np.asarray(value, dtype=object if dtype == tf.string
                                       else dtype.as_numpy_dtype))
        outputs = client.predict(args.model, inputs, args.signature,
                                 output_filter=args.output_filter, **where)
        return {"outputs": {name: _json_value(value) for name, value in outputs.items()}}


def _rest(args):
    from serving.client.rest_client import RestClient
    client = RestClient(args.rest, args.timeout)
    where = dict(version=args.version, label=args.label) if args.command != "reload" else {}
    if args.command == "status":
        return client.status(args.model, **where)
    if args.command == "metadata":
        return client.metadata(args.model, **where)
    if args.command == "reload":
        raise SystemExit("popef-client: reload is a gRPC ModelService call; use --grpc")
    if args.output_filter:
        raise SystemExit("popef-client: --output_filter is gRPC only (REST has no output filter)")
    if args.instances is not None:
        return client.predict(args.model, instances=json.loads(args.instances),
                              signature=args.signature, **where)
    inputs = {name: (value.tolist() if isinstance(value, np.ndarray) else value)
              for name, value in _read_inputs(args.input).items()}
    return client.predict(args.model, inputs=inputs, signature=args.signature, **where)


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    try:
        answer = _grpc(args) if args.grpc else _rest(args)
    except Exception as error:
        import grpc
        from serving.client.rest_client import RestError
        if isinstance(error, grpc.RpcError):
            print(f"{error.code().name}: {error.details()}", file=sys.stderr)
            return 1
        if isinstance(error, RestError):
            print(f"HTTP {error.status}: {error.message}", file=sys.stderr)
            return 1
        raise
    print(json.dumps(answer, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
