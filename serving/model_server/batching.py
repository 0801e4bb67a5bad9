"""Server-side batching with TF Serving's parameters and semantics (BasicBatchScheduler as
used by BatchingSession).

Requests to the same servable, signature and per-row input shapes join one queue. A batch
holds whole requests up to `max_batch_size` rows; it runs when full, or `batch_timeout_micros`
after its first request arrived (0: as soon as a batch thread is free). Each queue holds at
most `max_enqueued_batches` batches: a request that would need one more is refused with
UNAVAILABLE (HTTP 503, as TF Serving) instead of letting the queue grow. `num_batch_threads`
threads, shared by every model, run batches. With `allowed_batch_sizes` a batch is padded up to the
next allowed size with copies of its first row, and the padding is cut from the outputs.
Outputs are split back by rows, so every signature output must keep the batch dimension first.

With `enable_large_batch_splitting` (as TF Serving's SharedBatchScheduler), `max_batch_size`
limits a request and batches run at most `max_execution_batch_size` rows: a request that
does not fit the open batch fills it and continues in new batches; its answer is the
concatenation of its pieces' outputs. Queue parameters can differ per model (a version's
`batching_params.pbtxt`); the batch threads are shared.
"""
import collections
import dataclasses
import os
import threading
import time
from concurrent.futures import Future
from typing import Dict, List, Optional

import numpy as np

from serving.model_server.errors import as_serving_error, invalid_argument, unavailable
from serving.model_server.server_protos import warn_unused_fields

_UNUSED_BECAUSE = {
    "thread_pool_name": "the batch threads are one pool named by the server",
    "pad_variable_length_inputs": "requests whose rows differ in shape are batched in "
                                  "separate queues instead of being padded (same answers)",
    "max_execution_batch_size": "it only applies with enable_large_batch_splitting",
}


@dataclasses.dataclass
class BatchingOptions:
    """TF Serving's BasicBatchScheduler defaults, used for fields the file leaves unset."""
    max_batch_size: int = 1000
    batch_timeout_micros: int = 0
    max_enqueued_batches: int = 10
    num_batch_threads: int = dataclasses.field(default_factory=lambda: os.cpu_count() or 1)
    allowed_batch_sizes: List[int] = dataclasses.field(default_factory=list)
    enable_large_batch_splitting: bool = False
    max_execution_batch_size: Optional[int] = None   # None: max_batch_size

    @classmethod
    def from_proto(cls, proto, source: str = "batching parameters") -> "BatchingOptions":
        options = cls()
        for name in ("max_batch_size", "batch_timeout_micros", "max_enqueued_batches",
                     "num_batch_threads", "max_execution_batch_size",
                     "enable_large_batch_splitting"):
            if proto.HasField(name):
                setattr(options, name, getattr(proto, name).value)
        options.allowed_batch_sizes = list(proto.allowed_batch_sizes)
        used = {"max_batch_size", "batch_timeout_micros", "max_enqueued_batches",
                "num_batch_threads", "allowed_batch_sizes", "enable_large_batch_splitting"}
        if options.enable_large_batch_splitting:
            used.add("max_execution_batch_size")
        warn_unused_fields(proto, used, source, _UNUSED_BECAUSE)
        options.validate()
        return options

    @property
    def execution_batch_size(self) -> int:
        """The most rows one batch runs."""
        if self.enable_large_batch_splitting and self.max_execution_batch_size:
            return self.max_execution_batch_size
        return self.max_batch_size

    def validate(self) -> None:
        if self.max_batch_size <= 0:
            raise invalid_argument(f"max_batch_size must be positive, got {self.max_batch_size}")
        if self.num_batch_threads <= 0 or self.max_enqueued_batches <= 0:
            raise invalid_argument("num_batch_threads and max_enqueued_batches must be positive")
        if self.batch_timeout_micros < 0:
            raise invalid_argument("batch_timeout_micros must be >= 0")
        execution = self.execution_batch_size
        if not 0 < execution <= self.max_batch_size:
            raise invalid_argument(f"max_execution_batch_size must be in [1, max_batch_size "
                                   f"{self.max_batch_size}], got {execution}")
        sizes = self.allowed_batch_sizes
        if sizes:
            if any(b <= a for a, b in zip(sizes, sizes[1:])) or sizes[0] <= 0:
                raise invalid_argument(f"allowed_batch_sizes must be positive and strictly "
                                       f"increasing, got {sizes}")
            if sizes[-1] != execution:
                limit = ("max_execution_batch_size" if execution != self.max_batch_size
                         else "max_batch_size")
                raise invalid_argument(f"The last entry in allowed_batch_sizes must match "
                                       f"{limit}; last entry was {sizes[-1]}; expected "
                                       f"{execution}")


class _Task:
    __slots__ = ("inputs", "rows", "future", "enqueued")

    def __init__(self, inputs, rows):
        self.inputs, self.rows = inputs, rows
        self.future = Future()
        self.enqueued = time.perf_counter()


class _Batch:
    def __init__(self):
        self.tasks: List[_Task] = []
        self.rows = 0
        self.opened = time.perf_counter()


class _Queue:
    def __init__(self, servable, signature, options: BatchingOptions):
        self.servable, self.signature, self.options = servable, signature, options
        self.batches = collections.deque()   # the last one is open; the others are closed


def _rows(inputs: Dict[str, np.ndarray]) -> int:
    sizes = {name: (a.shape[0] if a.ndim else None) for name, a in inputs.items()}
    if None in sizes.values():
        scalar = [n for n, s in sizes.items() if s is None][0]
        raise invalid_argument(f"Batching requires every input to have a batch dimension; "
                               f"input '{scalar}' is a scalar")
    if len(set(sizes.values())) != 1:
        raise invalid_argument(f"Batching session Run() input tensors must have equal 0th-"
                               f"dimension size; got {sizes}")
    return next(iter(sizes.values()))


def _merge(parts: List[np.ndarray], rows: int, size: int) -> np.ndarray:
    """The tasks' rows in one array of `size` rows (one copy), padded with copies of the first
    row like TF Serving's BatchingSession."""
    first = parts[0]
    merged = np.empty((size,) + first.shape[1:], dtype=first.dtype)
    np.concatenate(parts, out=merged[:rows])
    if size > rows:
        merged[rows:] = merged[:1]
    return merged


def _padded_size(allowed_sizes: List[int], rows: int) -> int:
    for allowed in allowed_sizes:
        if allowed >= rows:
            return allowed
    return rows


class BatchScheduler:
    """Shared by all models; thread-safe. `observer` gets batch metrics (may be None)."""

    def __init__(self, options: BatchingOptions, observer=None):
        options.validate()
        self.options = options
        self._observer = observer
        self._cv = threading.Condition()
        self._queues: Dict[tuple, _Queue] = {}
        self._stopped = False
        self._threads = [threading.Thread(target=self._work, name=f"batch-{i}", daemon=True)
                         for i in range(options.num_batch_threads)]
        for thread in self._threads:
            thread.start()

    # ---- submit --------------------------------------------------------------------------
    def run(self, servable, signature: str, inputs: Dict[str, np.ndarray],
            options: Optional[BatchingOptions] = None) -> Dict[str, np.ndarray]:
        """Runs `inputs` in one or more batches (`options`: the model's queue parameters,
        else the scheduler's)."""
        options = options or self.options
        rows = _rows(inputs)
        if rows > options.max_batch_size:
            raise invalid_argument(f"Task size {rows} is larger than maximum input batch size "
                                   f"{options.max_batch_size}")
        key = (id(servable), signature,
               tuple(sorted((n, a.dtype.str, a.shape[1:]) for n, a in inputs.items())))
        limit = options.execution_batch_size
        with self._cv:
            if self._stopped:
                raise unavailable("the batch scheduler is shutting down")
            # A queue joins the table only with a task in it: the batch threads drop a queue
            # when they take its last batch, and stop() waits for the table to empty.
            queue = self._queues.get(key) or _Queue(servable, signature, options)
            batch = queue.batches[-1] if queue.batches else None
            room = limit - batch.rows if batch is not None else 0
            if rows > room and not options.enable_large_batch_splitting:
                room = 0   # without splitting a task never spans batches
            first = min(rows, room)   # rows that join the open batch
            sizes = ([first] if first else []) + [
                min(limit, rows - start) for start in range(first, rows, limit)]
            if len(queue.batches) + len(sizes) - bool(first) > options.max_enqueued_batches:
                if self._observer:
                    self._observer.queue_full(servable.name)
                raise unavailable(
                    "The batch scheduling queue to which this task was submitted is full "
                    f"({options.max_enqueued_batches} batches of up to {limit} rows)")
            self._queues[key] = queue
            pieces, start = [], 0
            for index, size in enumerate(sizes):
                # Batch threads are only woken when a batch starts its timeout or fills: a
                # wake-up per request would cost every request a GIL round trip.
                if index or not first:
                    batch = _Batch()
                    queue.batches.append(batch)
                    self._cv.notify()
                piece = _Task(inputs if size == rows else
                              {n: a[start:start + size] for n, a in inputs.items()}, size)
                batch.tasks.append(piece)
                batch.rows += size
                if batch.rows >= limit:
                    self._cv.notify()
                pieces.append(piece)
                start += size
        results = [piece.future.result() for piece in pieces]
        if len(results) == 1:
            return results[0]
        return {name: np.concatenate([r[name] for r in results]) for name in results[0]}

    # ---- batch threads -------------------------------------------------------------------
    def _ready_batch(self, now):
        """(queue, batch) of the oldest runnable batch, or (None, seconds to wait)."""
        best, wait = None, None
        for key, queue in self._queues.items():
            if not queue.batches:
                continue
            batch = queue.batches[0]
            full = (batch.rows >= queue.options.execution_batch_size
                    or len(queue.batches) > 1)
            due = batch.opened + queue.options.batch_timeout_micros / 1e6
            if full or now >= due:
                if best is None or batch.opened < best[1].opened:
                    best = (key, batch)
            else:
                wait = due - now if wait is None else min(wait, due - now)
        if best is None:
            return None, wait
        queue = self._queues[best[0]]
        queue.batches.popleft()
        if not queue.batches:
            del self._queues[best[0]]
        return (queue, best[1]), None

    def _work(self):
        while True:
            with self._cv:
                while True:
                    if self._stopped and not self._queues:
                        return
                    found, wait = self._ready_batch(time.perf_counter())
                    if found is not None:
                        break
                    self._cv.wait(wait)
            self._execute(*found)

    def _execute(self, queue: _Queue, batch: _Batch):
        started = time.perf_counter()
        tasks = batch.tasks
        size = _padded_size(queue.options.allowed_batch_sizes, batch.rows)
        try:
            merged = {name: _merge([t.inputs[name] for t in tasks], batch.rows, size)
                      for name in tasks[0].inputs}
            outputs = queue.servable.run_unbatched(queue.signature, merged)
            for name, value in outputs.items():
                if value.ndim == 0 or value.shape[0] != size:
                    raise invalid_argument(
                        f"Batched output tensor '{name}' has shape {list(value.shape)}, whose "
                        f"first dimension is not the batch size {size}: this signature cannot "
                        "be batched (start the server without --enable_batching)")
            offset = 0
            for task in tasks:
                task.future.set_result({n: v[offset:offset + task.rows]
                                        for n, v in outputs.items()})
                offset += task.rows
        except Exception as error:
            failure = as_serving_error(error)
            for task in tasks:
                if not task.future.done():
                    task.future.set_exception(failure)
        if self._observer:
            self._observer.batch_done(queue.servable.name, size, size - batch.rows,
                                      [started - t.enqueued for t in tasks])

    def stop(self) -> None:
        """Runs what is queued, then stops the threads."""
        with self._cv:
            self._stopped = True
            for queue in self._queues.values():
                for batch in queue.batches:
                    batch.opened = 0.0   # due now
            self._cv.notify_all()
        for thread in self._threads:
            thread.join(30)


class BatchingServable:
    """A Servable whose `run` goes through the shared BatchScheduler (with its own queue
    parameters if `options` is given)."""

    def __init__(self, servable, scheduler: BatchScheduler,
                 options: Optional[BatchingOptions] = None):
        self._servable = servable
        self._scheduler = scheduler
        self._options = options

    def __getattr__(self, name):
        return getattr(self._servable, name)

    def run(self, signature_name, inputs):
        key, _ = self._servable.signature_def(signature_name)
        self._servable.check_inputs(key, inputs)
        return self._scheduler.run(self, key, inputs, self._options)

    def run_unbatched(self, signature_name, inputs):
        return self._servable.run(signature_name, inputs)

    def unload(self):
        self._servable.unload()


def load_batching_options(path: Optional[str]) -> BatchingOptions:
    """The text-format BatchingParameters in `path` over TF Serving's defaults."""
    if not path:
        return BatchingOptions()
    from serving.model_server.server_protos import BatchingParameters, parse_text_file
    return BatchingOptions.from_proto(parse_text_file(path, BatchingParameters), path)
