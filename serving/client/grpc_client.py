"""PredictionService / ModelService calls with the official stubs, numpy in and out."""
from typing import Dict, Mapping, Optional, Sequence

import grpc
import numpy as np
from google.protobuf import text_format
from tensorflow_serving.apis import (get_model_metadata_pb2, get_model_status_pb2,
                                     model_management_pb2, model_service_pb2_grpc, predict_pb2,
                                     prediction_service_pb2_grpc)


def fill_model_spec(spec, model: str, signature: str = "", version: Optional[int] = None,
                    label: Optional[str] = None):
    spec.name = model
    spec.signature_name = signature
    if version is not None and label is not None:
        raise ValueError("give a version or a version label, not both")
    if version is not None:
        spec.version.value = int(version)
    elif label is not None:
        spec.version_label = label
    return spec


class GrpcClient:
    """One channel to `target` ("host:port"); every call has a deadline of `timeout_s`."""

    def __init__(self, target: str, timeout_s: float = 30.0, options: Sequence = ()):
        self.channel = grpc.insecure_channel(target, options=list(options))
        self.timeout_s = timeout_s
        self.prediction = prediction_service_pb2_grpc.PredictionServiceStub(self.channel)
        self.models = model_service_pb2_grpc.ModelServiceStub(self.channel)

    def close(self):
        self.channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def predict(self, model: str, inputs: Mapping[str, np.ndarray], signature: str = "",
                version: Optional[int] = None, label: Optional[str] = None,
                output_filter: Sequence[str] = ()) -> Dict[str, np.ndarray]:
        import tensorflow as tf
        request = predict_pb2.PredictRequest()
        fill_model_spec(request.model_spec, model, signature, version, label)
        for name, value in inputs.items():
            request.inputs[name].CopyFrom(tf.make_tensor_proto(value))
        request.output_filter.extend(output_filter)
        response = self.prediction.Predict(request, timeout=self.timeout_s)
        return {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}

    def metadata(self, model: str, version: Optional[int] = None, label: Optional[str] = None):
        """The model's SignatureDefMap."""
        request = get_model_metadata_pb2.GetModelMetadataRequest()
        fill_model_spec(request.model_spec, model, "", version, label)
        request.metadata_field.append("signature_def")
        response = self.prediction.GetModelMetadata(request, timeout=self.timeout_s)
        signatures = get_model_metadata_pb2.SignatureDefMap()
        response.metadata["signature_def"].Unpack(signatures)
        return signatures

    def status(self, model: str, version: Optional[int] = None, label: Optional[str] = None):
        request = get_model_status_pb2.GetModelStatusRequest()
        fill_model_spec(request.model_spec, model, "", version, label)
        return self.models.GetModelStatus(request, timeout=self.timeout_s)

    def reload_config(self, config_text: str):
        """HandleReloadConfigRequest with a text-format ModelServerConfig."""
        request = model_management_pb2.ReloadConfigRequest()
        text_format.Parse(config_text, request.config)
        return self.models.HandleReloadConfigRequest(request, timeout=self.timeout_s)
