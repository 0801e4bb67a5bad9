"""gRPC services with tensorflow-serving-api's stubs: thin handlers that call ServerCore and
map ServingError to the gRPC status (message truncated like TF Serving)."""
from tensorflow_serving.apis import (model_management_pb2, model_service_pb2_grpc,
                                     prediction_service_pb2_grpc)

from serving.model_server.errors import as_serving_error, truncated


def _call(context, function, request):
    try:
        return function(request)
    except Exception as error:  # every failure answers a status, never a crash
        failure = as_serving_error(error)
        context.abort(failure.code, truncated(failure.message))


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, core):
        self._core = core

    def Predict(self, request, context):
        return _call(context, self._core.predict, request)

    def GetModelMetadata(self, request, context):
        return _call(context, self._core.get_model_metadata, request)

    def Classify(self, request, context):
        return _call(context, self._core.classify, request)

    def Regress(self, request, context):
        return _call(context, self._core.regress, request)

    def MultiInference(self, request, context):
        return _call(context, self._core.multi_inference, request)


class ModelService(model_service_pb2_grpc.ModelServiceServicer):
    def __init__(self, core):
        self._core = core

    def GetModelStatus(self, request, context):
        return _call(context, self._core.get_model_status, request)

    def HandleReloadConfigRequest(self, request, context):
        def reload(req):
            self._core.reload_config(req.config)
            return model_management_pb2.ReloadConfigResponse()
        return _call(context, reload, request)


def add_services(server, core) -> None:
    prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
        PredictionService(core), server)
    model_service_pb2_grpc.add_ModelServiceServicer_to_server(ModelService(core), server)
