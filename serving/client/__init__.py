"""Light clients for the model server (and any TF Serving): gRPC with the official
tensorflow-serving-api stubs, REST with the standard library; `popef-client` is the CLI.

    from serving.client import GrpcClient, RestClient
    outputs = GrpcClient("localhost:8500").predict("m", {"x": np.ones([1, 2], np.float32)})
"""
from serving.client.grpc_client import GrpcClient
from serving.client.rest_client import RestClient, RestError

__all__ = ["GrpcClient", "RestClient", "RestError"]
