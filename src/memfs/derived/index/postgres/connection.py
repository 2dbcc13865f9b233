"""The PostgreSQL index: a connection pool, read and write sessions, the locks.

Many memfs servers share one database. What the SQLite index does with its flock and
thread lock, this does with transaction-scoped advisory locks (``writes.py``): a write
session is a READ COMMITTED transaction that takes an agent's lock when it first names
the agent, so writers of one agent queue (on every node) and each statement after the
lock sees what that agent's writers committed before; writers of other agents run
meanwhile. The visibility clock lives in the ``meta`` row ``clock``. A reader's
``readTimestamp`` is the clock its snapshot saw; a writer takes the clock row as the
last statement before its COMMIT (``PgWrite.finish``) and stamps its rows
``max(clock + 1, …)``. The row's lock orders those steps as the commits become visible,
so the asOf rule holds across nodes: a commit not visible in a reader's snapshot took
the clock row after the commit whose value that snapshot saw, hence is stamped after
the reader's readTimestamp, and never shows in a walk pinned to it.

A read session is a REPEATABLE READ READ ONLY transaction: one snapshot for all its
queries, as SQLite's deferred transaction gives.

PostgreSQL unreachable (refused, reset, timed out, restarting) is ``Unavailable``:
503 and retryable at the edges. A pooled connection found dead when a session starts
is dropped with the other idle ones and a new one made (``pool.py``: an idle
connection the server closed or reset has something to read, checked without a round
trip), so service resumes by itself, on the first request, once the database is back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import Connection

from memfs.derived.index.postgres import schema
from memfs.derived.index.postgres.pool import Pool
from memfs.derived.index.postgres.reads import BEGIN_READ, PgRead
from memfs.derived.index.postgres.writes import WRITE_LOCK, PgWrite
from memfs.derived.index.schema import DERIVED_TABLES, SCHEMA_VERSION
from memfs.errors import Unavailable

_BEGIN_WRITE = "BEGIN ISOLATION LEVEL READ COMMITTED"
# Creating or migrating the tables excludes every writer (WRITE_LOCK exclusively).
_BEGIN_MIGRATE = f"{_BEGIN_WRITE}; SELECT pg_advisory_xact_lock({WRITE_LOCK})"
Conn = Connection[tuple[Any, ...]]
_IDLE = psycopg.pq.TransactionStatus.IDLE
_S = TypeVar("_S", bound=PgRead)
CONNECT_TIMEOUT = 10
# How long a session waits for a pooled connection before answering 503.
POOL_WAIT = 30.0
POOL_SIZE = 16


class IndexUnreachable(Unavailable):
    """The PostgreSQL index cannot be reached or refused us (retryable)."""


def redacted(url: str) -> str:
    """``url`` with its password, if any, replaced by ``***`` (for messages and logs)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://…"
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host += f":{parts.port}"
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))


def _reason(exc: BaseException) -> str:
    """The first line of a driver error: libpq's messages run to several."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0].strip()


class PostgresIndex:
    """The derived index in a PostgreSQL database shared by every memfs server."""

    def __init__(self, url: str, *, pool_size: int = POOL_SIZE) -> None:
        self.url = url
        # The seam's file watch (``base.WatchedIndex``) has no counterpart here: no file
        # can be deleted or replaced under a server, so ``on_reopen`` is never called.
        self.path = Path(redacted(url))
        self.on_reopen: Callable[[], None] | None = None
        self.created = False
        self._migrate()
        self._pool = Pool(url, size=pool_size, connect_timeout=CONNECT_TIMEOUT, wait=POOL_WAIT)

    def _migrate(self) -> None:
        """Create or upgrade the tables, under the write lock (one node at a time: a
        second server starting waits, then finds the schema current)."""
        try:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT)
        except psycopg.Error as exc:
            raise IndexUnreachable(
                f"cannot open the PostgreSQL index {redacted(self.url)}: {_reason(exc)}"
            ) from None
        with conn:
            conn.execute(_BEGIN_MIGRATE)
            try:
                conn.execute(schema.TABLES[0])  # meta
                row = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
                if row is None:
                    self.created = True
                    schema.create(conn)
                elif int(row[0]) not in schema.KNOWN_SCHEMAS:
                    raise IndexUnreachable(
                        f"the PostgreSQL index {redacted(self.url)} has schema {row[0]},"
                        f" which this memfs (schema {SCHEMA_VERSION}) does not know: run the"
                        " memfs version that wrote it, or point MEMFS_INDEX at an empty database"
                    )
                else:
                    schema.migrate(conn, int(row[0]))
                    schema.create(conn)  # tables and indexes added without a version bump
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(psycopg.Error):
                    conn.execute("ROLLBACK")
                raise

    @contextmanager
    def _session(
        self, begin: str | None, session: Callable[[Conn, str | None], _S]
    ) -> Iterator[_S]:
        """``session`` over a pooled connection inside a transaction opened by ``begin``
        (sent with the session's first statement, one round trip fewer); committed
        (``finish``) when the block ends, rolled back on any error; driver outages
        become Unavailable."""
        try:
            conn = self._pool.getconn()
            commit = False  # a read session's COMMIT, sent by the pool (pool.py)
            try:
                opened = session(conn, begin)
                yield opened
                commit = opened.finish()
            except BaseException:
                if not conn.closed and conn.info.transaction_status != _IDLE:
                    with contextlib.suppress(psycopg.Error):
                        conn.execute("ROLLBACK")
                raise
            finally:
                self._pool.putconn(conn, commit=commit)
        except psycopg.OperationalError as exc:
            raise IndexUnreachable(
                f"the PostgreSQL index is unavailable ({_reason(exc)}); retry shortly"
            ) from None

    @contextmanager
    def read_session(self) -> Iterator[PgRead]:
        with self._session(BEGIN_READ, PgRead) as session:
            yield session

    def statement_session(self) -> AbstractContextManager[PgRead]:
        """A session for one query, in autocommit (one statement is one snapshot): no
        BEGIN sent with it, no COMMIT after it, for this process or PostgreSQL to run.
        A planning read of more than ``reads._LISTED_PATHS`` paths (two queries) opens
        its read transaction itself."""
        return self._session(None, PgRead)

    @contextmanager
    def write_session(self) -> Iterator[PgWrite]:
        with self._session(_BEGIN_WRITE, PgWrite) as session:
            yield session

    def checkpoint(self) -> None:
        """Reclaim the space of deleted rows (after an erase): VACUUM each table, so the
        erased rows' tuples are made reusable now rather than at autovacuum's next pass."""
        try:
            conn = self._pool.getconn()
            try:
                for table in DERIVED_TABLES:
                    conn.execute(f"VACUUM {table}")
            finally:
                self._pool.putconn(conn)
        except psycopg.OperationalError as exc:
            raise IndexUnreachable(
                f"the PostgreSQL index is unavailable ({_reason(exc)}); retry shortly"
            ) from None

    def close(self) -> None:
        self._pool.close()
