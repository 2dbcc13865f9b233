"""Group commit: concurrent callers of one process share one index transaction.

Three instances per Store: run registrations (``core/runs.py``), commits
(``core/commit.py``: each log entry is durable before it queues), and new delivery
records (``core/delivery_records.py``: there the flush is the durable write itself,
one for every record waiting, then the index transaction of their runs).

Each caller's durable write is done before it queues (so the fsyncs of concurrent
callers overlap). It then waits its turn; whoever leads flushes everything queued so
far in one write transaction, so N waiting callers share one flush and one SQLite
commit instead of queueing N times. A flushed item is marked ``done`` by the flush,
which also sets its result or error. Two ways of waiting (below): the commits' leader
lock, and per-caller wake-ups for registrations and delivery records.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar


class Queued(Protocol):
    done: bool


T = TypeVar("T", bound=Queued)


def _asleep() -> threading.Lock:
    """A lock already held: its waiter blocks on ``acquire`` until someone releases it
    (one futex wake-up for one thread, where an Event takes a Condition and its lock)."""
    wake = threading.Lock()
    wake.acquire()
    return wake


class GroupCommit(Generic[T]):
    """One queue and one leader lock; owned by the Store whose index it batches into.
    A flush must mark every item of its batch done, even when it raises.

    The commits' queue. A caller learns its item is done only once it gets the leader
    lock, so the callers of a batch pass through the lock one by one; measured against
    per-waiter wake-ups (``WakingGroupCommit``) with 16 writers, that convoy costs the
    commits nothing (they are bound by CPU, not by the wait) and makes their batches
    larger: 3.8-4.1 commits per index transaction against 2.7-3.0, with fewer context
    switches per write (docs/benchmarks.md, "16 writers: where the time goes")."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._leader = threading.Lock()
        self._queue: list[T] = []
        # Flushes begun and the items they took: the mean batch (scripts/bench_writers.py).
        self.flushes = 0
        self.flushed = 0

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
                    self.flushes += 1
                    self.flushed += len(batch)
                flush(batch)


class WakingGroupCommit(GroupCommit[T]):
    """``GroupCommit`` whose callers are woken as soon as the flush holding their item
    ends, each on a lock of its own (the queues of deliveries and run registrations,
    whose callers then still have work to do: a delivery's 202 waits for both).

    When a flush ends its leader wakes the oldest caller still queued first (it leads
    the next flush at once, with everything that queued meanwhile), then each caller of
    the flushed batch. Nobody else is woken: the condition this replaces woke every
    waiter, queued ones included, on every flush (``notify_all``), to find mostly that
    it could not proceed yet. An item a flush leaves undone is flushed again, first in
    the next batch. Measured in docs/benchmarks.md."""

    def __init__(self) -> None:
        super().__init__()
        # Queued items, each with the lock its caller sleeps on (None: a leader's own).
        self._waiting: list[tuple[T, threading.Lock | None]] = []
        self._flushing = False

    def waiting(self) -> int:
        with self._mutex:
            return len(self._waiting)

    def submit(self, item: T, flush: Callable[[list[T]], None]) -> None:
        with self._mutex:
            if self._flushing:
                wake: threading.Lock | None = _asleep()
                self._waiting.append((item, wake))
            else:
                self._flushing = True
                wake = None
                self._waiting.append((item, None))
        if wake is not None:
            wake.acquire()  # released once: its item is done, or it leads the next flush
            if item.done:
                return
        while True:
            with self._mutex:
                batch, self._waiting = self._waiting, []
                self.flushes += 1
                self.flushed += len(batch)
            try:
                flush([queued for queued, _ in batch])
            except BaseException:
                self._hand_over(item, batch, leaving=True)  # the error is this caller's
                raise
            if not self._hand_over(item, batch, leaving=False):
                return

    def lead_alone(self) -> bool:
        """True when no flush runs (so nothing is queued either): the caller then does
        its item's work itself, on its own thread, with no batch made around it, and
        calls ``end_alone`` once done. Whoever arrives meanwhile queues as behind any
        flush, and the first of them leads the next one. A single writer's commit
        paid about 30,000 instructions for the hand-off it skips (docs/benchmarks.md)."""
        with self._mutex:
            if self._flushing:
                return False
            self._flushing = True
            self.flushes += 1
            self.flushed += 1
            return True

    def end_alone(self) -> None:
        """After ``lead_alone``'s work: the oldest caller queued meanwhile leads next."""
        with self._mutex:
            if self._waiting:
                queued, leader = self._waiting[0]
                self._waiting[0] = (queued, None)  # it leads: nobody wakes it again
            else:
                leader = None
                self._flushing = False
        if leader is not None:
            leader.release()

    def _hand_over(
        self, item: T, batch: list[tuple[T, threading.Lock | None]], *, leaving: bool
    ) -> bool:
        """After a flush: wake the next leader, then the callers whose items are done.
        True when the leader must flush again (its own ``item`` was left undone and it
        is not ``leaving`` with the flush's exception)."""
        finished: list[threading.Lock] = []
        with self._mutex:
            again = not item.done and not leaving
            undone = [
                (queued, None if queued is item else wake)
                for queued, wake in batch
                if not queued.done and (queued is not item or again)
            ]
            for queued, wake in batch:
                if queued.done and wake is not None:
                    finished.append(wake)
            self._waiting[:0] = undone
            if again:
                leader = None  # this caller flushes again itself
            elif self._waiting:
                queued, leader = self._waiting[0]
                self._waiting[0] = (queued, None)  # it leads: nobody wakes it again
            else:
                leader = None
                self._flushing = False
        if leader is not None:
            leader.release()
        for wake in finished:
            wake.release()
        return again
