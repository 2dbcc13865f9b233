"""Group commit: concurrent callers of one process share one index transaction.

Three instances per Store: run registrations (``core/runs.py``), commits
(``core/commit.py``: each log entry is durable before it queues), and new delivery
records (``core/delivery_records.py``: there the flush is the durable write itself,
one for every record waiting, then the index transaction of their runs). Registrations and delivery records use
``WakingGroupCommit`` (below).

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


class WakingGroupCommit(GroupCommit[T]):
    """``GroupCommit`` whose callers are all woken as soon as the flush holding their
    item ends. In ``GroupCommit`` a caller learns its item is done only once it gets
    the leader lock, so the callers of a batch of N pass through the lock one by one
    (a thread switch each, slow on a loaded machine) and the next flush starts only
    after that convoy. Here they wait on a condition, notified together when a flush
    ends, and a waiter whose item is still queued leads the next flush at once.
    Flushes stay one at a time, and a flush must mark every item of its batch done
    (even when it raises), as with ``GroupCommit``. Measured in docs/benchmarks.md
    (16 threads of deliveries in one process: batches grew from ≈ 5 to ≈ 7 records,
    and the rate with them)."""

    def __init__(self) -> None:
        super().__init__()
        self._changed = threading.Condition(self._mutex)
        self._flushing = False

    def submit(self, item: T, flush: Callable[[list[T]], None]) -> None:
        with self._changed:
            self._queue.append(item)
            while not item.done:
                if self._flushing:
                    self._changed.wait()
                    continue
                self._flushing = True
                batch, self._queue = self._queue, []
                self._changed.release()
                try:
                    flush(batch)
                finally:
                    self._changed.acquire()
                    self._flushing = False
                    self._changed.notify_all()
