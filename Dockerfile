# The tf-popef model server image, with the tensorflow/serving image's conventions:
#   podman build -t tf-popef-serving .
#   podman run -p 8500:8500 -p 8501:8501 -v "$PWD/models/mymodel:/models/mymodel:ro" \
#       -e MODEL_NAME=mymodel tf-popef-serving [extra server flags]
# MODEL_NAME (default model) and MODEL_BASE_PATH (default /models) choose the model; gRPC on
# 8500, REST on 8501; arguments are passed to the server (deploy/docker/entrypoint.sh).
# BASE_IMAGE: any Debian-based image with Python 3.11 and its venv module as `python3`.
ARG BASE_IMAGE=python:3.11-slim

# Build stage: the compiler and build tools stay here.
FROM ${BASE_IMAGE} AS build
# gRPC C++ and protoc build the native KServe v2 listener (serving/kserve_native).
RUN apt-get update \
    && apt-get install -y --no-install-recommends g++ libgrpc++-dev libprotobuf-dev \
       protobuf-compiler protobuf-compiler-grpc pkg-config \
    && rm -rf /var/lib/apt/lists/*
ENV PATH=/opt/venv/bin:$PATH \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/venv
WORKDIR /src
# The pinned requirements first, so a source change does not reinstall TensorFlow.
COPY requirements.txt requirements-build.txt requirements-serving-nodeps.txt ./
RUN pip install -r requirements.txt -r requirements-build.txt \
    && pip install --no-deps -r requirements-serving-nodeps.txt
# The runtime's Python extension needs Python's headers: python:3.11-slim has them; a base with
# Debian's python3.11 gets python3-dev.
RUN python3 -c "import os, sysconfig; os.stat(os.path.join(sysconfig.get_paths()['include'], 'Python.h'))" \
    || (apt-get update && apt-get install -y --no-install-recommends python3-dev \
        && rm -rf /var/lib/apt/lists/*)
COPY . .
RUN pip install --no-build-isolation --no-deps . \
    && pip uninstall -y cmake ninja pybind11 nlohmann-json wheel \
    && cd / && python -c "import tf_popef_op, tensorflow; tf_popef_op.load_op_library()" \
    && python -c "import serving.kserve_native._kserve_native"

# Runtime stage: the virtualenv (Python packages, the runtime and op libraries), nothing else.
FROM ${BASE_IMAGE}
# The shared libraries the native KServe v2 listener links (--grpc_inference_port).
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgrpc++1.51 libprotobuf32 \
    && rm -rf /var/lib/apt/lists/*
RUN useradd --uid 1000 --user-group --create-home --home-dir /home/serving serving \
    && mkdir -p /models
COPY --from=build /opt/venv /opt/venv
COPY deploy/docker/entrypoint.sh /usr/bin/tf_serving_entrypoint.sh
# The drop-in keeps TF Serving's binary name, for scripts and manifests that call it.
RUN ln -s /opt/venv/bin/popef-model-server /usr/local/bin/tensorflow_model_server
ENV PATH=/opt/venv/bin:$PATH \
    TF_CPP_MIN_LOG_LEVEL=1 \
    MODEL_NAME=model \
    MODEL_BASE_PATH=/models
# gRPC
EXPOSE 8500
# REST
EXPOSE 8501
USER 1000:1000
ENTRYPOINT ["/usr/bin/tf_serving_entrypoint.sh"]
