"""KServe v2 gRPC: `inference.GRPCInferenceService` (stubs generated from Triton's
grpc_service.proto) on the gRPC port next to TF Serving's services.

ModelInfer decodes `raw_input_contents` with np.frombuffer (no copy) or the typed `contents`
fields, and answers every output in `raw_output_contents`, as Triton does. Streaming,
shared-memory, trace and log-settings methods answer UNIMPLEMENTED naming the method.

The generated `inference` protos register the same descriptors as tritonclient's own: a
process that imports tritonclient.grpc (the test process) must not import this module (or
triton_model_config's parsing); tests drive the server in a subprocess.
"""
import grpc
import numpy as np
from google.protobuf import json_format

from serving.model_server import kserve_codec
from serving.model_server.errors import invalid_argument
from serving.model_server.grpc_handlers import run_rpc
from serving.model_server.request_limits import element_count
from serving.model_server.kserve_rest import model_config
from serving.protos.triton import grpc_service_pb2 as pb
from serving.protos.triton import grpc_service_pb2_grpc as pb_grpc

# v2 datatype -> the typed InferTensorContents field that carries it (FP16 travels raw only).
_CONTENTS_FIELD = {
    "BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents",
    "INT32": "int_contents", "INT64": "int64_contents", "UINT8": "uint_contents",
    "UINT16": "uint_contents", "UINT32": "uint_contents", "UINT64": "uint64_contents",
    "FP32": "fp32_contents", "FP64": "fp64_contents", "BYTES": "bytes_contents",
}


def decode_inputs(request) -> dict:
    raw = request.raw_input_contents
    if raw and len(raw) != len(request.inputs):
        raise invalid_argument(f"raw_input_contents holds {len(raw)} tensors for "
                               f"{len(request.inputs)} inputs")
    inputs = {}
    for i, tensor in enumerate(request.inputs):
        name, datatype, shape = tensor.name, tensor.datatype, tuple(tensor.shape)
        if name in inputs:
            raise invalid_argument(f"input '{name}' is given twice")
        if raw:
            if tensor.HasField("contents"):
                raise invalid_argument(f"input '{name}': contents must be empty when "
                                       "raw_input_contents is used")
            inputs[name] = kserve_codec.from_raw(raw[i], datatype, shape, name)
            continue
        dtype = kserve_codec.numpy_dtype(datatype, name)
        field = _CONTENTS_FIELD.get(datatype)
        if field is None:
            raise invalid_argument(f"input '{name}': {datatype} data must be sent in "
                                   "raw_input_contents")
        values = getattr(tensor.contents, field)
        kserve_codec.check_shape(list(shape), name)
        count = element_count(shape, name, dtype.itemsize)
        if len(values) != count:
            raise invalid_argument(f"input '{name}': {len(values)} values in contents."
                                   f"{field} but shape {list(shape)} holds {count}")
        if datatype == "BYTES":
            array = np.empty(count, dtype=object)
            array[:] = list(values)
        else:
            try:
                array = np.array(values, dtype=dtype)
            except OverflowError as error:
                raise invalid_argument(f"input '{name}': values do not fit {datatype}: "
                                       f"{error}") from None
        inputs[name] = array.reshape(shape)
    return inputs


class InferenceService(pb_grpc.GRPCInferenceServiceServicer):
    def __init__(self, kserve):
        self._kserve = kserve

    def _call(self, context, function):
        return run_rpc(context, function)

    def ServerLive(self, request, context):
        return pb.ServerLiveResponse(live=True)

    def ServerReady(self, request, context):
        return pb.ServerReadyResponse(ready=self._kserve.ready())

    def ModelReady(self, request, context):
        return pb.ModelReadyResponse(ready=self._kserve.model_ready(request.name,
                                                                    request.version))

    def ServerMetadata(self, request, context):
        return pb.ServerMetadataResponse(**self._kserve.server_metadata())

    def ModelMetadata(self, request, context):
        def metadata():
            body = self._kserve.model_metadata(request.name, request.version)
            return json_format.ParseDict(body, pb.ModelMetadataResponse())
        return self._call(context, metadata)

    def ModelConfig(self, request, context):
        def config():
            body = model_config(self._kserve, request.name, request.version)
            response = pb.ModelConfigResponse()
            json_format.ParseDict(body, response.config)
            return response
        return self._call(context, config)

    def ModelInfer(self, request, context):
        return run_rpc(context, lambda: self._infer(request), self._kserve.core.admission,
                       request.model_name)

    def _infer(self, request):
        inputs = decode_inputs(request)
        wanted = [o.name for o in request.outputs] if request.outputs else None
        target, outputs = self._kserve.infer(request.model_name, request.model_version,
                                             inputs, wanted)
        response = pb.ModelInferResponse(model_name=request.model_name,
                                         model_version=str(target.servable.version),
                                         id=request.id)
        for name, array in outputs.items():
            tensor = response.outputs.add()
            tensor.name = name
            tensor.datatype = kserve_codec.datatype_of(array.dtype)
            tensor.shape.extend(array.shape)
            response.raw_output_contents.append(kserve_codec.to_raw(array))
        return response

    def ModelStatistics(self, request, context):
        def statistics():
            rows = self._kserve.model_statistics(request.name, request.version)
            return json_format.ParseDict({"model_stats": rows}, pb.ModelStatisticsResponse())
        return self._call(context, statistics)

    def RepositoryIndex(self, request, context):
        def index():
            response = pb.RepositoryIndexResponse()
            for row in self._kserve.repository_index(request.ready):
                response.models.add(**row)
            return response
        return self._call(context, index)

    def RepositoryModelLoad(self, request, context):
        def load():
            self._kserve.load(request.model_name)
            return pb.RepositoryModelLoadResponse()
        return self._call(context, load)

    def RepositoryModelUnload(self, request, context):
        def unload():
            self._kserve.unload(request.model_name)
            return pb.RepositoryModelUnloadResponse()
        return self._call(context, unload)


def _unimplemented(method: str):
    def handler(self, request, context):
        context.abort(grpc.StatusCode.UNIMPLEMENTED,
                      f"inference.GRPCInferenceService/{method} is not implemented by this "
                      "server")
    handler.__name__ = method
    return handler


for _method in ("ModelStreamInfer", "SystemSharedMemoryStatus", "SystemSharedMemoryRegister",
                "SystemSharedMemoryUnregister", "CudaSharedMemoryStatus",
                "CudaSharedMemoryRegister", "CudaSharedMemoryUnregister", "TraceSetting",
                "LogSettings"):
    setattr(InferenceService, _method, _unimplemented(_method))


def add_inference_service(server, kserve) -> None:
    pb_grpc.add_GRPCInferenceServiceServicer_to_server(InferenceService(kserve), server)
