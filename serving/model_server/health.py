"""grpc.health.v1.Health (grpcio-health-checking's servicer) whose open Watch streams can be
ended: at shutdown the watchers first get NOT_SERVING, then their streams end with OK, so an
open Watch never holds the server's drain until the grace period runs out."""
import threading

from grpc_health.v1 import health as grpc_health, health_pb2, health_pb2_grpc

SERVICES = ("", "tensorflow.serving.PredictionService", "tensorflow.serving.ModelService",
            "inference.GRPCInferenceService")


class HealthService(grpc_health.HealthServicer):
    def __init__(self):
        super().__init__()
        self._streams_lock = threading.Lock()
        self._streams = set()   # send_response_callback of every open Watch

    def Watch(self, request, context, send_response_callback=None):  # noqa: N802 (gRPC name)
        if send_response_callback is not None:
            send_response_callback = _ends_once(send_response_callback)
            with self._streams_lock:
                self._streams.add(send_response_callback)

            def forget():
                with self._streams_lock:
                    self._streams.discard(send_response_callback)
            context.add_callback(forget)
        return super().Watch(request, context, send_response_callback)

    def serve(self, services=SERVICES) -> None:
        for service in services:
            self.set(service, health_pb2.HealthCheckResponse.SERVING)

    def shut_down(self) -> None:
        """Every service NOT_SERVING (told to every watcher), then every Watch stream ends."""
        self.enter_graceful_shutdown()
        with self._streams_lock:
            streams, self._streams = list(self._streams), set()
        for send_response_callback in streams:
            send_response_callback(None)


def _ends_once(send_response_callback):
    """The stream's callback, where only the first end (None) is passed on: the stream is
    ended here at shutdown and again by the base servicer when the RPC completes."""
    ended = threading.Event()
    lock = threading.Lock()

    def send(response):
        if response is None:
            with lock:
                if ended.is_set():
                    return
                ended.set()
        elif ended.is_set():
            return
        send_response_callback(response)
    return send


def add_health_service(server) -> HealthService:
    service = HealthService()
    health_pb2_grpc.add_HealthServicer_to_server(service, server)
    service.serve()
    return service
