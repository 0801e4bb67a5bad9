"""TF Serving config protos that tensorflow-serving-api does not ship (BatchingParameters,
MonitoringConfig, SSLConfig), rebuilt from their .proto definitions with the same package,
names and field numbers, so the same text files parse here and in tensorflow_model_server."""
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, wrappers_pb2

_F = descriptor_pb2.FieldDescriptorProto
_OPTIONAL, _REPEATED = _F.LABEL_OPTIONAL, _F.LABEL_REPEATED


def _message(file_proto, name, fields):
    message = file_proto.message_type.add(name=name)
    for number, (field_name, kind, label, type_name) in enumerate(fields, start=1):
        field = message.field.add(name=field_name, number=number, label=label, type=kind)
        if type_name:
            field.type_name = type_name


def _build():
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(wrappers_pb2.DESCRIPTOR.serialized_pb)
    f = descriptor_pb2.FileDescriptorProto(name="popef_serving_config.proto",
                                           package="tensorflow.serving", syntax="proto3",
                                           dependency=["google/protobuf/wrappers.proto"])
    int64 = (_F.TYPE_MESSAGE, _OPTIONAL, ".google.protobuf.Int64Value")
    # tensorflow_serving/servables/tensorflow/session_bundle_config.proto
    _message(f, "BatchingParameters", [
        ("max_batch_size", *int64),
        ("batch_timeout_micros", *int64),
        ("max_enqueued_batches", *int64),
        ("num_batch_threads", *int64),
        ("thread_pool_name", _F.TYPE_MESSAGE, _OPTIONAL, ".google.protobuf.StringValue"),
        ("allowed_batch_sizes", _F.TYPE_INT64, _REPEATED, None),
        ("pad_variable_length_inputs", _F.TYPE_BOOL, _OPTIONAL, None),
    ])
    # tensorflow_serving/config/monitoring_config.proto
    _message(f, "PrometheusConfig", [
        ("enable", _F.TYPE_BOOL, _OPTIONAL, None),
        ("path", _F.TYPE_STRING, _OPTIONAL, None),
    ])
    _message(f, "MonitoringConfig", [
        ("prometheus_config", _F.TYPE_MESSAGE, _OPTIONAL, ".tensorflow.serving.PrometheusConfig"),
    ])
    # tensorflow_serving/config/ssl_config.proto
    _message(f, "SSLConfig", [
        ("server_key", _F.TYPE_STRING, _OPTIONAL, None),
        ("server_cert", _F.TYPE_STRING, _OPTIONAL, None),
        ("custom_ca", _F.TYPE_STRING, _OPTIONAL, None),
        ("client_verify", _F.TYPE_BOOL, _OPTIONAL, None),
    ])
    pool.Add(f)
    return {name: message_factory.GetMessageClass(
        pool.FindMessageTypeByName(f"tensorflow.serving.{name}"))
        for name in ("BatchingParameters", "PrometheusConfig", "MonitoringConfig", "SSLConfig")}


_CLASSES = _build()
BatchingParameters = _CLASSES["BatchingParameters"]
MonitoringConfig = _CLASSES["MonitoringConfig"]
SSLConfig = _CLASSES["SSLConfig"]


def parse_text_file(path: str, message_class):
    from google.protobuf import text_format
    from serving.model_server.errors import invalid_argument
    message = message_class()
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    try:
        text_format.Parse(text, message)
    except text_format.ParseError as error:
        raise invalid_argument(f"{path}: not a text-format {message_class.DESCRIPTOR.name}: "
                               f"{error}") from None
    return message
