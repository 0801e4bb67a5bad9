"""A TensorFlow-Serving-compatible model server (gRPC + REST) that loads custom-op libraries.

Layers, each in its own module (see docs/serving.md):
    flags, model_config, version_policy, version_source   what to serve
    servable, manager                                      loading and lifecycle
    predictor, tensor_codec, rest_json                     request semantics
    grpc_handlers, rest_handlers, errors                   protocols (thin, stateless)
    server                                                 wiring, ports, signals
"""
SERVER_VERSION = "0.1.0"
