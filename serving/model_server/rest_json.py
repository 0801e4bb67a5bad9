"""TF Serving's REST JSON formats: predict bodies (row `instances` / columnar `inputs`,
`{"b64": ...}` binary) to numpy inputs, and outputs back to `predictions` / `outputs`.
Status and metadata responses are rendered from the same protos the gRPC API returns."""
import base64
import json

import grpc
import numpy as np
from google.protobuf import json_format
from tensorflow.core.example import example_pb2, feature_pb2
from tensorflow_serving.apis import get_model_metadata_pb2, input_pb2

from serving.model_server.errors import invalid_argument, status_name
from serving.model_server.request_limits import check_json_depth

_CODES = {code.value[0]: code for code in grpc.StatusCode}

_B64 = "b64"


def parse_body(raw: bytes) -> dict:
    if not raw or not raw.strip():
        raise invalid_argument("JSON Parse error: The document is empty")
    check_json_depth(raw)
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        position = getattr(error, "pos", 0)
        reason = getattr(error, "msg", str(error))
        raise invalid_argument(f"JSON Parse error: {reason} at offset: {position}") from None
    if not isinstance(body, dict):
        raise invalid_argument("JSON Value: body is not an object")
    return body


def _is_b64(value) -> bool:
    return isinstance(value, dict) and set(value) == {_B64}


def _decode_strings(value):
    """Strings and {"b64": ...} leaves to bytes, keeping the nesting."""
    if isinstance(value, list):
        return [_decode_strings(v) for v in value]
    if _is_b64(value):
        try:
            return base64.b64decode(value[_B64], validate=True)
        except (ValueError, TypeError) as error:
            raise invalid_argument(f"Unable to base64 decode: {error}") from None
    if isinstance(value, str):
        return value.encode("utf-8")
    raise invalid_argument(f"JSON Value: {json.dumps(value)} Type: {type(value).__name__} is "
                           "not of expected type: string")


def to_array(value, tf_dtype, name: str) -> np.ndarray:
    """A JSON value as an array of the signature input's dtype, or INVALID_ARGUMENT."""
    if tf_dtype.name == "string":
        decoded = _decode_strings(value)
        array = np.empty(np.shape(np.array(decoded, dtype=object)), dtype=object)
        array[...] = np.array(decoded, dtype=object)
        if any(isinstance(v, list) for v in array.flat):   # numpy kept a ragged level
            raise invalid_argument(f"JSON Value for input '{name}': nested lists of different "
                                   "lengths (a ragged list is not a tensor)")
        return array
    if _contains(value, lambda v: isinstance(v, (str, dict))):
        raise invalid_argument(f"JSON Value for input '{name}' holds a string or object where "
                               f"{tf_dtype.name} numbers are expected")
    if not tf_dtype.is_bool and _contains(value, lambda v: v is None):
        raise invalid_argument(f"JSON Value for input '{name}' holds null")
    try:
        array = np.array(value, dtype=tf_dtype.as_numpy_dtype)
    except (ValueError, TypeError, OverflowError) as error:
        raise invalid_argument(f"input '{name}': cannot read JSON value as "
                               f"{tf_dtype.name}: {error}") from None
    return array


def _contains(value, predicate) -> bool:
    if isinstance(value, list):
        return any(_contains(v, predicate) for v in value)
    return predicate(value)


def inputs_from_body(body: dict, input_dtypes: dict):
    """(inputs {name: array}, "row" | "columnar") from a :predict body."""
    has_rows, has_columns = "instances" in body, "inputs" in body
    if has_rows == has_columns:
        raise invalid_argument("Missing 'inputs' or 'instances' key" if not has_rows else
                               "Not both 'instances' and 'inputs' can be specified")
    unknown = set(body) - {"instances", "inputs", "signature_name"}
    if unknown:
        raise invalid_argument(f"Unknown key(s) in request body: {sorted(unknown)}")
    if has_rows:
        return _rows(body["instances"], input_dtypes), "row"
    return _columns(body["inputs"], input_dtypes), "columnar"


def _single_input(input_dtypes):
    if len(input_dtypes) != 1:
        raise invalid_argument(
            f"The signature has {len(input_dtypes)} inputs ({sorted(input_dtypes)}): give them "
            "by name (an object per instance, or an object of named inputs)")
    return next(iter(input_dtypes))


def _check_names(names, input_dtypes):
    unknown = set(names) - set(input_dtypes)
    if unknown:
        raise invalid_argument(
            f"input tensor alias not found in signature: {sorted(unknown)[0]}. Inputs expected "
            f"to be in the set {{{','.join(sorted(input_dtypes))}}}.")


def _rows(instances, input_dtypes):
    if not isinstance(instances, list) or not instances:
        raise invalid_argument("'instances' must be a non-empty JSON list")
    named = [isinstance(row, dict) and not _is_b64(row) for row in instances]
    if any(named) and not all(named):
        raise invalid_argument("'instances' mixes named (object) and unnamed rows")
    if not all(named):
        name = _single_input(input_dtypes)
        return {name: to_array(instances, input_dtypes[name], name)}
    names = set(instances[0])
    for index, row in enumerate(instances):
        if set(row) != names:
            raise invalid_argument(f"instance {index} has inputs {sorted(row)}, instance 0 has "
                                   f"{sorted(names)}: every instance needs the same inputs")
    _check_names(names, input_dtypes)
    inputs = {}
    for name in names:
        rows = [to_array(row[name], input_dtypes[name], name) for row in instances]
        shapes = {r.shape for r in rows}
        if len(shapes) != 1:
            raise invalid_argument(f"input '{name}': instances have different shapes "
                                   f"{sorted(shapes)}; every instance must have the same shape")
        inputs[name] = np.stack(rows)
    return inputs


def _columns(columns, input_dtypes):
    if isinstance(columns, dict) and not _is_b64(columns):
        _check_names(columns, input_dtypes)
        return {name: to_array(v, input_dtypes[name], name) for name, v in columns.items()}
    name = _single_input(input_dtypes)
    return {name: to_array(columns, input_dtypes[name], name)}


def _json_value(name: str, array: np.ndarray):
    if array.dtype == object or array.dtype.kind in "SU":
        as_b64 = name.endswith("_bytes")
        def leaf(v):
            if isinstance(v, str):
                v = v.encode("utf-8")
            if as_b64:
                return {_B64: base64.b64encode(v).decode("ascii")}
            return v.decode("utf-8", errors="replace")
        return np.vectorize(leaf, otypes=[object])(array).tolist() if array.ndim else leaf(
            array.item())
    if array.dtype == np.float32 or array.dtype == np.float16:
        # Shortest round-trip text of the float32 value ("0.1", not 0.10000000149011612).
        return array.astype(str).astype(np.float64).tolist()
    return array.tolist()


def predictions_body(outputs: dict, layout: str) -> dict:
    """`{"predictions": [...]}` (row) or `{"outputs": ...}` (columnar); one output is
    written without its name, as TF Serving does."""
    if layout == "columnar":
        if len(outputs) == 1:
            (name, value), = outputs.items()
            return {"outputs": _json_value(name, value)}
        return {"outputs": {n: _json_value(n, v) for n, v in outputs.items()}}
    batch_sizes = {n: (v.shape[0] if v.ndim else None) for n, v in outputs.items()}
    if None in batch_sizes.values() or len(set(batch_sizes.values())) != 1:
        raise invalid_argument(
            f"Output tensors have inconsistent batch sizes {batch_sizes}: use the columnar "
            "'inputs' format for this signature")
    if len(outputs) == 1:
        (name, value), = outputs.items()
        return {"predictions": _json_value(name, value)}
    columns = {n: _json_value(n, v) for n, v in outputs.items()}
    count = next(iter(batch_sizes.values()))
    return {"predictions": [{n: columns[n][i] for n in columns} for i in range(count)]}


def message_dict(message) -> dict:
    """A proto as TF Serving's REST API prints it: proto field names, defaults included."""
    return json_format.MessageToDict(message, preserving_proto_field_name=True,
                                     always_print_fields_with_no_presence=True)


def status_body(response) -> dict:
    rows = []
    for entry in response.model_version_status:
        rows.append({
            "version": str(entry.version),
            "state": type(entry).State.Name(entry.state),
            "status": {"error_code": status_name(_CODES.get(entry.status.error_code,
                                                            grpc.StatusCode.UNKNOWN)),
                       "error_message": entry.status.error_message},
        })
    return {"model_version_status": rows}


def metadata_body(response) -> dict:
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(signature_map)
    return {
        "model_spec": {"name": response.model_spec.name, "signature_name": "",
                       "version": str(response.model_spec.version.value)},
        "metadata": {"signature_def": message_dict(signature_map)},
    }


# ---- :classify / :regress ----------------------------------------------------------------
def _feature(name, value):
    values = value if isinstance(value, list) else [value]
    feature = feature_pb2.Feature()
    if not values:
        return feature
    try:
        if all(isinstance(v, bool) or isinstance(v, int) for v in values):
            feature.int64_list.value.extend(int(v) for v in values)
            return feature
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            feature.float_list.value.extend(float(v) for v in values)
            return feature
    except (ValueError, OverflowError):   # protobuf: outside int64; float(): past float64
        raise invalid_argument(f"feature '{name}': a value does not fit an int64 or float "
                               f"feature: {json.dumps(value)[:200]}") from None
    if all(isinstance(v, str) or _is_b64(v) for v in values):
        feature.bytes_list.value.extend(_decode_strings(values))
    else:
        raise invalid_argument(f"feature '{name}': values must be all numbers or all strings "
                               f"(or {{\"b64\": ...}}), got {json.dumps(value)[:200]}")
    return feature


def _example(features: dict, where: str):
    if not isinstance(features, dict):
        raise invalid_argument(f"{where} must be a JSON object of features")
    example = example_pb2.Example()
    for name, value in features.items():
        example.features.feature[name].CopyFrom(_feature(name, value))
    return example


def examples_input(body: dict):
    """tensorflow.serving.Input from `{"context": {...}, "examples": [{...}, ...]}`."""
    unknown = set(body) - {"signature_name", "context", "examples"}
    if unknown:
        raise invalid_argument(f"Unknown key(s) in request body: {sorted(unknown)}")
    examples = body.get("examples")
    if not isinstance(examples, list) or not examples:
        raise invalid_argument("'examples' must be a non-empty JSON list")
    parsed = [_example(e, f"examples[{i}]") for i, e in enumerate(examples)]
    input_proto = input_pb2.Input()
    if "context" in body:
        target = input_proto.example_list_with_context
        target.context.CopyFrom(_example(body["context"], "context"))
    else:
        target = input_proto.example_list
    target.examples.extend(parsed)
    return input_proto


def classify_body(result) -> dict:
    return {"results": [[[c.label, c.score] for c in entry.classes]
                        for entry in result.classifications]}


def regress_body(result) -> dict:
    return {"results": [r.value for r in result.regressions]}
