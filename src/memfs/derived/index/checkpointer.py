"""WAL checkpoints off the commit path: a thread per index copies the WAL into the main
file (``PRAGMA wal_checkpoint(PASSIVE)``, on a connection of its own) every
``EVERY`` write transactions of this process, so no writer's COMMIT pays it.

Without it, SQLite's auto-checkpoint ran inside whichever COMMIT first found the WAL
past its threshold: that COMMIT wrote ~40 MiB into the main file and fsynced it (the
top 10 COMMITs of 2,000 creates took 571 ms of the 939 ms all COMMITs took, see
docs/benchmarks.md). SQLite's own auto-checkpoint stays on as a backstop at a larger
threshold (``connection.WAL_AUTOCHECKPOINT``): a process that never starts the thread
(a CLI command's one commit) or a stuck thread still bounds the WAL.

A passive checkpoint takes no lock a writer or a reader waits on, and stops at the
oldest snapshot a reader holds. But the WAL restarts from its start (and so stops growing) only when a write
transaction begins while every frame is copied, which a steady writer rarely lets a
pass see: its commits land while the pass fsyncs. So once a pass copied every frame
it saw, the thread makes the restart itself (``restart``: a write transaction of one
page, which answers the frames the WAL holds after it); from the ``LOCKED`` th pass
of a wake on, in the index's write queue with one last pass before it, so no commit
lands between the two (writers wait for that pass: the few frames since the one
before, never the whole WAL). At most ``ROUNDS`` passes per wake. Nothing depends on
it for correctness: an erase's ``Index.checkpoint`` (TRUNCATE) is separate, and
retries while a pass runs.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from memfs.canonical import durable

log = logging.getLogger("memfs.index")

EVERY = 512  # write transactions between checkpoints (~17 pages each: ~8,700 pages)
ROUNDS = 20  # passes to catch up with writers appending meanwhile, per wake
LOCKED = 2  # passes without the write queue before the restart takes it
PAUSE_S = 0.005  # between passes: a writer's transaction takes well under a millisecond
IDLE_S = 5.0  # no wake for this long: the thread ends (restarted on the next)


class Checkpointer:
    """Calls ``checkpoint`` (one passive pass: it answers SQLite's (busy, frames in
    the WAL, frames copied)) in a thread of its own every ``every`` calls of ``noted``,
    and ``restart`` once a pass copied every frame."""

    def __init__(
        self,
        checkpoint: Callable[[], tuple[int, int, int]],
        restart: Callable[[bool], int],
        *,
        every: int = EVERY,
        idle_s: float = IDLE_S,
    ) -> None:
        self._checkpoint, self._restart = checkpoint, restart
        self._every, self._idle_s = every, idle_s
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._count = 0
        self._thread: threading.Thread | None = None
        self._closed = False
        self._working = False
        self._pid = durable.pid()  # noted runs on every commit: no getpid call
        self.runs = 0  # checkpoint calls made (tests and benchmarks read it)

    def noted(self) -> None:
        """A write transaction committed."""
        self._count += 1  # racy under threads by design: an approximate count is enough
        if self._count < self._every:
            return
        if self._pid != durable.pid():
            # A forked child (a server's worker) has none of its parent's threads, and
            # may have a copy of the lock as some thread held it: start afresh.
            self._pid = durable.pid()
            self._lock, self._wake = threading.Lock(), threading.Event()
            self._thread = None
        with self._lock:
            self._count = 0
            if self._closed:
                return
            self._wake.set()
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="memfs-wal-checkpoint", daemon=True
                )
                self._thread.start()

    def settled(self) -> bool:
        """No wake waiting and no pass running (what tests wait for)."""
        with self._lock:
            return not self._wake.is_set() and not self._working

    def close(self, timeout: float = 10.0) -> None:
        """No more checkpoints; waits for one running to end."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        while True:
            self._wake.wait(self._idle_s)
            with self._lock:  # a wake set after the wait timed out still counts
                if self._closed or not self._wake.is_set():
                    self._thread = None
                    return
                self._wake.clear()
                self._working = True
            try:
                self._catch_up()
            except Exception as exc:  # the backstop auto-checkpoint still bounds the WAL
                log.debug("background WAL checkpoint failed: %s", exc)
            finally:
                self._working = False

    def _catch_up(self) -> None:
        before = -1
        for round_ in range(ROUNDS):
            self.runs += 1
            busy, frames, copied = self._checkpoint()
            if self._closed or frames < 0 or frames < before:
                return  # closing, no WAL (-1), or the WAL restarted meanwhile
            if busy == 0 and frames == copied and self._restart(round_ >= LOCKED) < frames:
                return  # it started over
            before = frames
            time.sleep(PAUSE_S)
