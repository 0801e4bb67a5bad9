"""TF Serving's text-format config files (BatchingParameters, MonitoringConfig, SSLConfig,
PlatformConfigMap with its SavedModelBundleSourceAdapterConfig, TensorFlow's ConfigProto) read with their upstream message classes through
`tf.io.gfile`, so any file system TensorFlow knows (gs://, s3://, ram://, ...) works.

Upstream fields this server has no use for still parse (a file written for
tensorflow_model_server loads unchanged); `warn_unused_fields` logs each such field once.
"""
import logging

from serving.model_server.errors import invalid_argument
from serving.protos.tensorflow_serving.tensorflow_serving.config.monitoring_config_pb2 import (
    MonitoringConfig)
from serving.protos.tensorflow_serving.tensorflow_serving.config.ssl_config_pb2 import SSLConfig
from serving.protos.tensorflow_serving.tensorflow_serving.servables.tensorflow.saved_model_bundle_source_adapter_pb2 import (  # noqa: E501
    SavedModelBundleSourceAdapterConfig)
from serving.protos.tensorflow_serving.tensorflow_serving.servables.tensorflow.session_bundle_config_pb2 import (  # noqa: E501
    BatchingParameters)
from tensorflow_serving.config.platform_config_pb2 import PlatformConfigMap

log = logging.getLogger("popef_model_server")

__all__ = ["BatchingParameters", "MonitoringConfig", "PlatformConfigMap", "SSLConfig",
           "SavedModelBundleSourceAdapterConfig", "parse_text_file", "read_file",
           "warn_unused_fields"]

_warned = set()


def read_file(path: str) -> str:
    import tensorflow as tf
    try:
        with tf.io.gfile.GFile(path, "r") as handle:
            return handle.read()
    except (tf.errors.OpError, UnicodeDecodeError) as error:
        message = getattr(error, "message", str(error))
        raise invalid_argument(f"{path}: cannot read: {message}") from None


def parse_text_file(path: str, message_class):
    """The text-format `message_class` in `path`; INVALID_ARGUMENT naming the file otherwise."""
    from google.protobuf import text_format
    message = message_class()
    try:
        text_format.Parse(read_file(path), message)
    except text_format.ParseError as error:
        raise invalid_argument(f"{path}: not a text-format {message_class.DESCRIPTOR.name}: "
                               f"{error}") from None
    return message


def warn_unused_fields(message, used, source: str, because: dict,
                       default: str = "this server has no equivalent") -> None:
    """Logs once per (source, field) each set field of `message` whose name is not in `used`
    (nested messages as `outer.inner`), with the reason `because[name]` (else `default`)."""
    for name in sorted(_set_fields(message)):
        if name in used or (source, name) in _warned:
            continue
        _warned.add((source, name))
        log.warning("%s: %s is accepted but ignored: %s", source, name,
                    because.get(name, default))


def _set_fields(message, prefix=""):
    for field, value in message.ListFields():
        name = prefix + field.name
        if (field.type == field.TYPE_MESSAGE and not field.is_repeated
                and not field.message_type.GetOptions().map_entry
                and field.message_type.full_name.startswith("tensorflow.")):
            nested = list(_set_fields(value, name + "."))
            yield from nested if nested else [name]
        else:
            yield name
