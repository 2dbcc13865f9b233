"""Group commit: concurrent callers of one process share one index transaction.

Three instances per Store: run registrations (``core/runs.py``), commits
(``core/commit.py``: each log entry is durable before it queues), and new delivery
records (``core/delivery_records.py``: there the flush is the durable write itself,
one for every record waiting).

Each caller's durable write is done before it queues (so the fsyncs of concurrent
callers overlap). It then waits for the leader lock; whoever holds it flushes
everything queued so far in one write transaction, so N waiting callers share one lock
round and one SQLite commit instead of queueing N times. A flushed item is marked
``done`` by the flush, which also sets its result or error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar


class Queued(Protocol):
    done: bool


T = TypeVar("T", bound=Queued)


class GroupCommit(Generic[T]):
    """One queue and one leader lock; owned by the Store whose index it batches into."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._leader = threading.Lock()
        self._queue: list[T] = []

    def waiting(self) -> int:
        """How many submitted items no flush has taken yet (tests wait on it)."""
        with self._mutex:
            return len(self._queue)

    def submit(self, item: T, flush: Callable[[list[T]], None]) -> None:
        """Return once ``item`` was flushed, by this caller or by the leader before it."""
        with self._mutex:
            self._queue.append(item)
        with self._leader:
            if not item.done:
                with self._mutex:
                    batch, self._queue = self._queue, []
                flush(batch)
