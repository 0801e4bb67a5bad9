"""The one place where server errors become gRPC codes and HTTP statuses.

Every layer below the protocol handlers raises `ServingError(code, message)` with a
`grpc.StatusCode`; the gRPC handlers abort with that code and the REST handlers answer
`{"error": message}` with the HTTP status TF Serving uses for it
(tensorflow_serving/util/net_http/... `ToHTTPStatusCode`).
"""
import grpc

# TF Serving's REST status mapping; every code not listed answers 500.
_HTTP_STATUS = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.CANCELLED: 500,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.UNAVAILABLE: 503,
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}

# TF Serving truncates very long error messages before sending them.
MAX_MESSAGE_CHARS = 4096


class ServingError(Exception):
    """A request or model failure with the gRPC status code it answers."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message

    def __repr__(self):
        return f"ServingError({self.code.name}, {self.message!r})"


def invalid_argument(message):
    return ServingError(grpc.StatusCode.INVALID_ARGUMENT, message)


def not_found(message):
    return ServingError(grpc.StatusCode.NOT_FOUND, message)


def failed_precondition(message):
    return ServingError(grpc.StatusCode.FAILED_PRECONDITION, message)


def unimplemented(message):
    return ServingError(grpc.StatusCode.UNIMPLEMENTED, message)


def resource_exhausted(message):
    return ServingError(grpc.StatusCode.RESOURCE_EXHAUSTED, message)


def unavailable(message):
    return ServingError(grpc.StatusCode.UNAVAILABLE, message)


def as_serving_error(exc: BaseException) -> ServingError:
    """Wraps any exception raised while serving a request, keeping its message.

    TensorFlow's own errors carry a canonical code that is copied; argument errors raised
    while binding a signature are INVALID_ARGUMENT; everything else is INTERNAL.
    """
    if isinstance(exc, ServingError):
        return exc
    import tensorflow as tf  # deferred: this module is imported by light-weight clients too
    if isinstance(exc, tf.errors.OpError):
        code = _TF_CODE_TO_GRPC.get(exc.error_code, grpc.StatusCode.INTERNAL)
        return ServingError(code, exc.message)
    if isinstance(exc, (ValueError, TypeError)):
        return ServingError(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
    return ServingError(grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}")


def model_run_error(exc: BaseException) -> ServingError:
    """An error raised while a loaded version runs a request. NOT_FOUND answers only for an
    unknown model, version or signature (REST 404); a file missing inside a loaded model is
    the server's fault, so it answers INTERNAL (HTTP 500). Other codes are kept: DATA_LOSS
    for a corrupt file (500), INVALID_ARGUMENT for bad inputs (400), ..."""
    failure = as_serving_error(exc)
    if failure.code == grpc.StatusCode.NOT_FOUND:
        return ServingError(grpc.StatusCode.INTERNAL,
                            f"the model failed to run (a file it needs is missing): "
                            f"{failure.message}")
    return failure


def truncated(message: str) -> str:
    if len(message) <= MAX_MESSAGE_CHARS:
        return message
    return message[:MAX_MESSAGE_CHARS] + "...[truncated]"


def http_status(code: grpc.StatusCode) -> int:
    return _HTTP_STATUS.get(code, 500)


def status_name(code: grpc.StatusCode) -> str:
    """The canonical name TF Serving prints in JSON statuses (e.g. "NOT_FOUND")."""
    return code.name


# tensorflow.errors codes are the canonical absl codes, same numbers as gRPC's.
_TF_CODE_TO_GRPC = {code.value[0]: code for code in grpc.StatusCode}
