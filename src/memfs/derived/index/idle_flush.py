"""The full-text rows' background flush: once commits pause (or enough paths wait),
a short-lived thread indexes the pending paths (``search.flush``), a batch per write
transaction, so commits interleave with it and the next search finds little to do.

Nothing depends on it for correctness: every search flushes first, in any process.
The thread ends when nothing is left to flush (a store that sits idle holds no thread
and no connection), and any error leaves the rows pending for the next search.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from memfs.canonical import durable

log = logging.getLogger("memfs.index")

IDLE_S = 0.05  # no commit for this long: flush
EVERY = 256  # or this many paths waiting: flush now (one segment per batch)


class IdleFlush:
    """Calls ``flush`` in a thread of its own after ``noted`` paths, once idle."""

    def __init__(self, flush: Callable[[], None], *, idle_s: float = IDLE_S, every: int = EVERY):
        self._flush = flush
        self._idle_s, self._every = idle_s, every
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._count = 0
        self._last = 0.0
        self._thread: threading.Thread | None = None
        self._closed = False
        self._pid = durable.pid()  # noted runs on every commit: no getpid call

    def noted(self, paths: int) -> None:
        """A committed write transaction left ``paths`` pending."""
        if paths <= 0:
            return
        if self._pid != durable.pid():
            # A forked child (a server's worker) has none of its parent's threads, and
            # may have a copy of the lock as some thread held it: start afresh.
            self._pid = durable.pid()
            self._lock, self._wake = threading.Lock(), threading.Event()
            self._thread, self._count = None, 0
        with self._lock:
            if self._closed:
                return
            self._count += paths
            self._last = time.monotonic()
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="memfs-search-flush", daemon=True
                )
                self._thread.start()
            elif self._count >= self._every:
                self._wake.set()

    def close(self, timeout: float = 10.0) -> None:
        """No more flushes; waits for one running to end."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._closed or self._count == 0:
                    self._thread = None
                    return
                wait = self._last + self._idle_s - time.monotonic()
                if self._count >= self._every or wait <= 0:
                    self._count = 0
                    wait = 0.0
                else:
                    self._wake.clear()
            if wait > 0:
                self._wake.wait(wait)
                continue
            try:
                self._flush()
            except Exception as exc:  # the rows stay pending: the next search flushes
                log.debug("background full-text flush failed: %s", exc)
