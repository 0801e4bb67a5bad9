"""Admission control: a bound on the requests a model (and the whole server) holds at once,
counted from the moment a request is accepted until it is answered, so queued and running
work are both bounded. A request past either bound is refused at once with
RESOURCE_EXHAUSTED (HTTP 429) instead of waiting in an unbounded queue."""
import contextlib
import threading

from serving.model_server.errors import resource_exhausted


class Admission:
    def __init__(self, max_total: int, max_per_model: int):
        self.max_total = max_total            # 0 = unbounded
        self.max_per_model = max_per_model    # 0 = unbounded
        self._lock = threading.Lock()
        self._total = 0
        self._per_model = {}

    def acquire(self, model: str) -> None:
        with self._lock:
            if self.max_total and self._total >= self.max_total:
                raise resource_exhausted(
                    f"the server holds {self._total} requests, its limit "
                    f"(--max_queued_requests={self.max_total}): retry later")
            held = self._per_model.get(model, 0)
            if self.max_per_model and held >= self.max_per_model:
                raise resource_exhausted(
                    f"model '{model}' holds {held} requests, its limit "
                    f"(--max_queued_requests_per_model={self.max_per_model}): retry later")
            self._total += 1
            self._per_model[model] = held + 1

    def release(self, model: str) -> None:
        with self._lock:
            self._total -= 1
            held = self._per_model[model] - 1
            if held:
                self._per_model[model] = held
            else:
                del self._per_model[model]

    @contextlib.contextmanager
    def admitted(self, model: str):
        self.acquire(model)
        try:
            yield
        finally:
            self.release(model)

    @property
    def held(self) -> int:
        with self._lock:
            return self._total


UNBOUNDED = Admission(0, 0)
