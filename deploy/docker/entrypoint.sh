#!/bin/sh
# The tensorflow/serving image's entrypoint (/usr/bin/tf_serving_entrypoint.sh): the model
# server on gRPC 8500 and REST 8501, serving ${MODEL_BASE_PATH}/${MODEL_NAME}; arguments given
# to the container are appended, so any flag can be added or overridden (the last one wins).
# `exec` makes the server PID 1's process, so SIGTERM reaches it and it drains before exiting.
set -e
MODEL_NAME="${MODEL_NAME:-model}"
MODEL_BASE_PATH="${MODEL_BASE_PATH:-/models}"
exec tensorflow_model_server --port=8500 --rest_api_port=8501 \
    --model_name="${MODEL_NAME}" --model_base_path="${MODEL_BASE_PATH}/${MODEL_NAME}" "$@"
