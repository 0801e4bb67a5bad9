"""gRPC services with tensorflow-serving-api's stubs: thin handlers that call ServerCore and
map ServingError to the gRPC status (message truncated like TF Serving). Inference RPCs pass
admission control (admission.py) and are dropped unrun if their deadline passed while they
waited for a thread."""
import grpc
from tensorflow_serving.apis import (model_management_pb2, model_service_pb2_grpc,
                                     prediction_service_pb2_grpc)

from serving.model_server.errors import as_serving_error, truncated


def run_rpc(context, function, admission=None, model: str = ""):
    """function() answered as the RPC's result, or its error as the RPC's status."""
    remaining = context.time_remaining()
    if not context.is_active() or (remaining is not None and remaining <= 0):
        context.abort(grpc.StatusCode.DEADLINE_EXCEEDED,
                      "Deadline exceeded before the request started")
    try:
        if admission is None:
            return function()
        with admission.admitted(model):
            return function()
    except Exception as error:  # every failure answers a status, never a crash
        failure = as_serving_error(error)
        context.abort(failure.code, truncated(failure.message))


def _call(context, function, request):
    return run_rpc(context, lambda: function(request))


class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, core):
        self._core = core

    def _infer(self, context, function, request, model: str):
        return run_rpc(context, lambda: function(request), self._core.admission, model)

    def Predict(self, request, context):
        return self._infer(context, self._core.predict, request, request.model_spec.name)

    def GetModelMetadata(self, request, context):
        return _call(context, self._core.get_model_metadata, request)

    def Classify(self, request, context):
        return self._infer(context, self._core.classify, request, request.model_spec.name)

    def Regress(self, request, context):
        return self._infer(context, self._core.regress, request, request.model_spec.name)

    def MultiInference(self, request, context):
        model = request.tasks[0].model_spec.name if request.tasks else ""
        return self._infer(context, self._core.multi_inference, request, model)


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
