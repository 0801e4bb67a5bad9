"""The model set: a text-format `ModelServerConfig` (tensorflow-serving-api's proto), or the
single model of `--model_name/--model_base_path`, checked before anything is loaded."""
from google.protobuf import text_format
from tensorflow_serving.config import model_server_config_pb2

from serving.model_server.errors import invalid_argument

_SUPPORTED_PLATFORMS = ("", "tensorflow")


def single_model_config(name: str, base_path: str) -> model_server_config_pb2.ModelServerConfig:
    config = model_server_config_pb2.ModelServerConfig()
    model = config.model_config_list.config.add()
    model.name = name
    model.base_path = base_path
    model.model_platform = "tensorflow"
    return config


def parse_config_text(text: str, origin: str = "<text>") -> model_server_config_pb2.ModelServerConfig:
    config = model_server_config_pb2.ModelServerConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as error:
        raise invalid_argument(f"{origin}: not a text-format ModelServerConfig: {error}") from None
    validate_config(config, origin)
    return config


def read_config_text(path: str) -> str:
    """The config file's text, read through tf.io.gfile (any file system TensorFlow knows)."""
    import tensorflow as tf
    try:
        with tf.io.gfile.GFile(path, "r") as handle:
            return handle.read()
    except tf.errors.OpError as error:
        raise invalid_argument(f"{path}: cannot read the model config file: "
                               f"{error.message}") from None


def read_config_file(path: str) -> model_server_config_pb2.ModelServerConfig:
    return parse_config_text(read_config_text(path), path)


def validate_config(config, origin: str = "ModelServerConfig") -> None:
    """Rejects what the server cannot serve, naming the model and the field."""
    kind = config.WhichOneof("config")
    if kind == "custom_model_config":
        raise invalid_argument(f"{origin}: custom_model_config is not supported; use "
                               "model_config_list.")
    seen = set()
    for model in config.model_config_list.config:
        where = f"{origin}: model {model.name!r}"
        if not model.name:
            raise invalid_argument(f"{origin}: a model_config_list entry has no name.")
        if model.name in seen:
            raise invalid_argument(f"{origin}: model name {model.name!r} appears twice.")
        seen.add(model.name)
        if not model.base_path:
            raise invalid_argument(f"{where} has no base_path.")
        if model.model_platform not in _SUPPORTED_PLATFORMS:
            raise invalid_argument(f"{where}: model_platform {model.model_platform!r} is not "
                                   "supported (only 'tensorflow' SavedModels).")
        policy = model.model_version_policy
        if (policy.WhichOneof("policy_choice") == "specific"
                and not policy.specific.versions):
            raise invalid_argument(f"{where}: model_version_policy specific {{}} lists no "
                                   "versions.")
        if (policy.WhichOneof("policy_choice") == "latest"
                and policy.latest.num_versions < 0):
            raise invalid_argument(f"{where}: latest.num_versions must be >= 1.")
        for label in model.version_labels:
            if not label or not (label[0].isalpha() or label[0] == "_") or not all(
                    c.isalnum() or c in "_-" for c in label):
                raise invalid_argument(f"{where}: version label {label!r} must start with a "
                                       "letter and hold only letters, digits, '-' and '_'.")


def model_names(config):
    return [model.name for model in config.model_config_list.config]
