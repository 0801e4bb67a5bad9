"""What the server's request decoders may answer a fuzz input with: a decoded request, or the
protocol's clear error (a ServingError with INVALID_ARGUMENT, the 400 of both REST APIs).
Anything else (another exception type, another code) is a finding. Decoded tensors are capped
at 16 MiB (--max_decoded_tensor_bytes) so the fuzzer's memory limit only catches leaks."""
import os
import sys

import grpc

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if _REPO not in sys.path:
    sys.path.insert(0, _REPO)

from serving.model_server.errors import ServingError  # noqa: E402
from serving.model_server.request_limits import set_max_decoded_tensor_bytes  # noqa: E402

set_max_decoded_tensor_bytes(16 << 20)


def decode_or_refuse(decode) -> None:
    """Runs decode(); a ServingError must be INVALID_ARGUMENT with a message."""
    try:
        decode()
    except ServingError as error:
        if error.code != grpc.StatusCode.INVALID_ARGUMENT or not error.message:
            raise AssertionError(f"decoder answered {error!r}, not a clear "
                                 "INVALID_ARGUMENT") from error
