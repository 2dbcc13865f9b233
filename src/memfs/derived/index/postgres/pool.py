"""A small connection pool that fails fast: the PostgreSQL index's connections.

psycopg_pool connects in background workers: while the database is down a checkout
waits its whole timeout (a request hangs for 30 s instead of answering 503), and after
the database comes back its reconnect backoff can keep the pool empty for minutes.
Here a checkout takes an idle connection, or connects in the calling thread: a database
that is down is an immediate error naming the reason, and the first request after it
is back connects again. At most ``size`` connections exist at once; a checkout beyond
that waits (up to ``wait`` seconds) for one to be returned.

A read session's COMMIT is sent as the connection is given back, and its answer read
when the connection is next taken (``putconn(conn, commit=True)``): a read-only
transaction's end needs no answer before the request goes on, and by the next checkout
the answer has long arrived, so a read session costs one round trip fewer. PostgreSQL
runs the COMMIT on receipt: the snapshot is not held while the connection is idle.
"""

from __future__ import annotations

import contextlib
import math
import select
import threading
import time
from typing import Any

import psycopg
from psycopg import Connection

Conn = Connection[tuple[Any, ...]]


def _ready(fd: int, events: int, timeout: float) -> bool:
    """Whether ``fd`` is ready for ``events`` within ``timeout`` seconds. ``poll``, not
    ``select``: a busy server holds more than FD_SETSIZE (1024) descriptors, and
    ``select`` refuses any numbered past it."""
    poller = select.poll()
    poller.register(fd, events)
    return bool(poller.poll(max(0, math.ceil(timeout * 1000))))


def _dropped(conn: Conn) -> bool:
    """Whether an idle connection's socket is readable (end of file, a reset, the
    server's goodbye), without waiting: no round trip."""
    try:
        readable = _ready(conn.pgconn.socket, select.POLLIN, 0)
    except (OSError, ValueError, psycopg.Error):
        return True
    return readable or conn.closed or conn.broken


def _send_commit(conn: Conn) -> None:
    """Send COMMIT on ``conn`` without waiting for its answer (psycopg's connections
    are non-blocking: flush until libpq has handed everything to the socket)."""
    pgconn = conn.pgconn
    pgconn.send_query(b"COMMIT")
    while pgconn.flush():
        _ready(pgconn.socket, select.POLLOUT, 1.0)


def _read_commit(conn: Conn, timeout: float) -> bool:
    """Read the answer of the COMMIT ``_send_commit`` sent: whether it committed and
    left the connection idle (else the connection is to be dropped). A backend that
    ended meanwhile (a restart, ``pg_terminate_backend``, an idle timeout) said so in
    a FATAL message, which libpq passes on as a notice once the connection is idle:
    reading the answer consumed it, so the socket may no longer look readable
    (``_dropped``) until the end of file arrives. Such a notice marks it dead."""
    pgconn = conn.pgconn
    fatal: list[str] = []

    def notice(diag: psycopg.errors.Diagnostic) -> None:
        if diag.severity_nonlocalized in ("FATAL", "PANIC"):
            fatal.append(diag.message_primary or "")

    conn.add_notice_handler(notice)
    try:
        return _drain(conn, pgconn, timeout) and not fatal
    finally:
        conn.remove_notice_handler(notice)


def _drain(conn: Conn, pgconn: psycopg.pq.abc.PGconn, timeout: float) -> bool:
    try:
        deadline = time.monotonic() + timeout
        pgconn.consume_input()
        while pgconn.is_busy():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            _ready(pgconn.socket, select.POLLIN, left)
            pgconn.consume_input()
        ok = False
        while (result := pgconn.get_result()) is not None:
            ok = result.status == psycopg.pq.ExecStatus.COMMAND_OK
    except (OSError, ValueError, psycopg.Error):
        return False
    return ok and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


class PoolExhausted(psycopg.OperationalError):
    """Every connection stayed busy for the whole wait."""


class Pool:
    def __init__(self, url: str, *, size: int, connect_timeout: int, wait: float) -> None:
        self.url = url
        self.connect_timeout = connect_timeout
        self.wait = wait
        # Idle connections, each with whether its COMMIT's answer is still to be read.
        self._idle: list[tuple[Conn, bool]] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(size)
        self._closed = False

    def connect(self) -> Conn:
        # Keepalives and a TCP user timeout: a database host that vanishes (no RST) is
        # noticed in seconds by a waiting query, rather than after the kernel's hours.
        return psycopg.connect(
            self.url,
            autocommit=True,
            connect_timeout=self.connect_timeout,
            keepalives=1,
            keepalives_idle=5,
            keepalives_interval=2,
            keepalives_count=3,
            tcp_user_timeout=15_000,
        )

    def getconn(self) -> Conn:
        """An idle connection (newest first), else a new one; raises OperationalError.
        An idle connection with something to read was closed or reset by the server
        (a restart, an outage, an idle timeout: an idle session is sent nothing else):
        it is dropped with every other idle one, opened before the same event."""
        if not self._slots.acquire(timeout=self.wait):
            raise PoolExhausted(f"no free index connection within {self.wait:.0f}s")
        try:
            with self._lock:
                if self._closed:
                    raise psycopg.OperationalError("the index is closed")
                conn, ending = self._idle.pop() if self._idle else (None, False)
            if conn is not None and ending and not _read_commit(conn, self.connect_timeout):
                with contextlib.suppress(psycopg.Error):
                    conn.close()
                self.drop_idle()
                conn = None
            if conn is not None and _dropped(conn):
                with contextlib.suppress(psycopg.Error):
                    conn.close()
                self.drop_idle()
                conn = None
            return conn if conn is not None else self.connect()
        except BaseException:
            self._slots.release()
            raise

    def putconn(self, conn: Conn, *, commit: bool = False) -> None:
        """Give back a connection taken with ``getconn``: kept if it is idle and sound,
        closed otherwise (broken by an outage, or left inside a transaction). With
        ``commit``, its (read-only) transaction is ended here: COMMIT is sent, and its
        answer read at the next checkout."""
        try:
            status = conn.info.transaction_status
            sound = not conn.closed and not conn.broken
            if sound and commit and status == psycopg.pq.TransactionStatus.INTRANS:
                try:
                    _send_commit(conn)
                except (OSError, ValueError, psycopg.Error):
                    sound = False
            else:
                commit = False
                sound = sound and status == psycopg.pq.TransactionStatus.IDLE
            with self._lock:
                if sound and not self._closed:
                    self._idle.append((conn, commit))
                    return
            with contextlib.suppress(psycopg.Error):
                conn.close()
        finally:
            self._slots.release()

    def drop_idle(self) -> None:
        """Close every idle connection (after one was found dead: the others, opened
        before the same outage, are dead too)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            with contextlib.suppress(psycopg.Error):
                conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self.drop_idle()
