"""Request semantics shared by gRPC and REST: Predict and GetModelMetadata on a
ServableManager. Handlers fill request protos and call these; nothing here knows the
protocol."""
from google.protobuf import any_pb2
from tensorflow_serving.apis import get_model_metadata_pb2, get_model_status_pb2, predict_pb2

from serving.model_server.errors import invalid_argument
from serving.model_server.tensor_codec import to_ndarray, to_tensor_proto

SIGNATURE_DEF_FIELD = "signature_def"


def _fill_spec(spec, servable, signature_name=None):
    spec.name = servable.name
    spec.version.value = servable.version
    if signature_name is not None:
        spec.signature_name = signature_name


def predict(manager, request: predict_pb2.PredictRequest) -> predict_pb2.PredictResponse:
    servable = manager.resolve(request.model_spec)
    key, signature = servable.signature_def(request.model_spec.signature_name)
    wanted = list(request.output_filter) or list(signature.outputs)
    for alias in wanted:
        if alias not in signature.outputs:
            raise invalid_argument(
                f"output tensor alias not found in signature: {alias} Outputs expected to be "
                f"in the set {{{','.join(sorted(signature.outputs))}}}.")
    if len(set(wanted)) != len(wanted):
        raise invalid_argument(f"duplicate output tensor alias in output_filter: {wanted}")
    inputs = {name: to_ndarray(proto, name) for name, proto in request.inputs.items()}
    outputs = servable.run(key, inputs)
    response = predict_pb2.PredictResponse()
    _fill_spec(response.model_spec, servable, key)
    for alias in wanted:
        to_tensor_proto(outputs[alias], into=response.outputs[alias])
    return response


def get_model_metadata(manager, request):
    fields = list(request.metadata_field)
    if not fields:
        raise invalid_argument("GetModelMetadataRequest must specify at least one "
                               "metadata_field")
    for field in fields:
        if field != SIGNATURE_DEF_FIELD:
            raise invalid_argument(f"Metadata field {field} is not supported")
    servable = manager.resolve(request.model_spec)
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    for name, signature in servable.signature_defs.items():
        signature_map.signature_def[name].CopyFrom(signature)
    response = get_model_metadata_pb2.GetModelMetadataResponse()
    _fill_spec(response.model_spec, servable)
    packed = any_pb2.Any()
    packed.Pack(signature_map)
    response.metadata[SIGNATURE_DEF_FIELD].CopyFrom(packed)
    return response


def get_model_status(manager, request):
    spec = request.model_spec
    choice = spec.WhichOneof("version_choice")
    rows = manager.status(spec.name,
                          version=spec.version.value if choice == "version" else None,
                          label=spec.version_label if choice == "version_label" else None)
    response = get_model_status_pb2.GetModelStatusResponse()
    for version, state, error in rows:
        entry = response.model_version_status.add()
        entry.version = version
        entry.state = state
        if error is not None:
            entry.status.error_code = error.code.value[0]
            entry.status.error_message = error.message
    return response

