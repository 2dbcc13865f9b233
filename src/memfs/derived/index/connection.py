"""The index file: one connection per thread, read and write transactions, the file watch."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from memfs.derived.index import search
from memfs.derived.index.checkpointer import Checkpointer
from memfs.derived.index.idle_flush import IdleFlush
from memfs.derived.index.rows import IndexGone
from memfs.derived.index.schema import _SCHEMA, KNOWN_SCHEMAS, SCHEMA_VERSION, migrate
from memfs.derived.index.sessions import SqliteRead, SqliteWrite

# SQLite's own auto-checkpoint, in pages (4 KiB; its default is 1,000): only a backstop,
# the checkpointer thread copies the WAL long before (see checkpointer.py).
WAL_AUTOCHECKPOINT = 40_000


class Index:
    """One SQLite file shared by every process; one connection per thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._path_text = os.fspath(path)  # stat of a str skips Path.__fspath__ per session
        # True when opening found no usable index (missing, empty, unknown schema), so
        # what this file holds says nothing yet: the store rebuilds it from the log.
        self.created = False
        self.on_reopen: Callable[[], None] | None = None
        self._local = threading.local()
        self._writer = threading.RLock()
        # Processes queue on an flock of this file: the kernel wakes the next waiter
        # when it is released, where SQLite's busy handler sleeps and polls (unfair:
        # a writer in a tight loop could starve the others for seconds).
        self._queue_path = path.with_name(path.name + ".lock")
        self._queue = -1
        self._opened = False
        self._checkpoints = Checkpointer(self._checkpoint_passive, self._restart_wal)
        self._queue = os.open(self._queue_path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self._queue, fcntl.LOCK_EX)  # released by _migrate's transaction
        if not path.exists():
            # Write-ahead files left by a deleted index belong to another database:
            # SQLite would apply them to the new file.
            for suffix in ("-wal", "-shm"):
                path.with_name(path.name + suffix).unlink(missing_ok=True)
        self._migrate()
        self._opened = True
        self._one_statement = _OneStatement(self)
        self._idle = IdleFlush(self._flush_idle)

    def _connect(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        # One stat per transaction (about a microsecond): a file deleted or replaced
        # under a running server is noticed at once, never served as an empty store.
        try:
            inode = os.stat(self._path_text).st_ino
        except FileNotFoundError:
            inode = None
        if conn is not None and inode != self._local.inode:
            conn.close()  # deleted or replaced: reopen what stands there now, if usable
            self._local.conn = conn = None
            if self.on_reopen is not None:
                self.on_reopen()  # the store checks the new file against the log
        if conn is None:
            if inode is None and self._opened:
                raise IndexGone(str(self.path))  # only the first open may create it
            conn = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            self._local.inode = os.stat(self.path).st_ino
            conn.execute("PRAGMA busy_timeout=60000")
            if self._opened and not _usable(conn):
                conn.close()
                raise IndexGone(str(self.path))  # replaced by something else
            _enable_wal(conn)
            # The index is derived: a commit lost to power failure is replayed from the
            # log, so the WAL need not be fsynced on every commit.
            conn.execute("PRAGMA synchronous=NORMAL")
            # Only a backstop: the checkpointer thread copies the WAL every ~512 write
            # transactions, off the commit path. A process without the thread (a CLI
            # command) or a stuck one still bounds the WAL (160 MiB at most); an erase
            # still truncates it.
            conn.execute(f"PRAGMA wal_autocheckpoint={WAL_AUTOCHECKPOINT}")
            # Deleted rows are overwritten with zeros (in their pages and in freed pages),
            # so an erased agent's text leaves no trace in the file (see checkpoint()).
            conn.execute("PRAGMA secure_delete=ON")
            self._local.conn = conn
            self._local.one = SqliteRead(conn, self.flush_search, heads=False)
        return conn

    def checkpoint(self) -> None:
        """Copy the WAL into the main file and truncate it to zero bytes: after an
        erase, the old page images the WAL still held are gone too."""
        conn = self._connect()
        busy = 1
        deadline = time.monotonic() + 60
        while busy and time.monotonic() < deadline:
            # busy while a reader of another process sits on an older snapshot
            busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            if busy:
                time.sleep(0.01)

    def _checkpoint_passive(self) -> tuple[int, int, int]:
        """The checkpointer thread's pass: copy what the WAL holds into the main file
        without waiting on anyone; (busy, frames in the WAL, frames copied). A connection of
        its own, closed after (no watch kept on a file that may be replaced), opened
        read-write without creating: a deleted index is not made again here."""
        conn = sqlite3.connect(f"file:{self._path_text}?mode=rw", uri=True, isolation_level=None)
        try:
            busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        finally:
            conn.close()
        return int(busy), int(frames), int(copied)

    def _restart_wal(self, locked: bool) -> int:
        """The checkpointer thread's restart: a write transaction of one page; the
        frames the WAL holds after it. Begun while every frame of the WAL is copied,
        SQLite writes it at the WAL's start (the file stops growing); begun later, it
        is one frame more. ``locked``: a last passive pass first, in the index's write
        queue (so no commit lands between the two). Not fsynced
        (``synchronous=NORMAL``)."""
        conn = sqlite3.connect(f"file:{self._path_text}?mode=rw", uri=True, isolation_level=None)
        try:
            conn.execute("PRAGMA busy_timeout=60000")
            conn.execute("PRAGMA synchronous=NORMAL")
            with self._writer:
                if self._queue < 0:
                    return 0  # closed
                fcntl.flock(self._queue, fcntl.LOCK_EX)
                try:
                    if locked:
                        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    conn.execute("BEGIN IMMEDIATE")
                    try:
                        conn.execute("UPDATE meta SET value=value WHERE key='schema'")
                        conn.execute("COMMIT")
                    except BaseException:
                        if conn.in_transaction:
                            with contextlib.suppress(sqlite3.Error):
                                conn.execute("ROLLBACK")
                        raise
                finally:
                    fcntl.flock(self._queue, fcntl.LOCK_UN)
            return int(conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1])
        finally:
            conn.close()

    def flush_search(self) -> None:
        """Index every pending full-text row (search.flush), in a write transaction."""
        with self.write() as conn:
            search.flush(conn)

    def _flush_idle(self) -> None:
        """The background flush: a batch per transaction, so commits go between them;
        its connection closed after (the thread ends, and must not keep a watch on a
        file a test or an operator may replace)."""
        try:
            while True:
                with self.write() as conn:
                    if search.flush(conn, batches=1) < search.FLUSH_BATCH:
                        return
        finally:
            kept: sqlite3.Connection | None = getattr(self._local, "conn", None)
            if kept is not None:
                kept.close()
                self._local.conn = None

    def close(self) -> None:
        self._idle.close()
        self._checkpoints.close()
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
        with self._writer:
            if self._queue >= 0:
                os.close(self._queue)
                self._queue = -1

    def _migrate(self) -> None:
        with self.write() as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL)"
                " WITHOUT ROWID"
            )
            row = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is not None and row[0] not in KNOWN_SCHEMAS:
                # Derived state of a schema this memfs doesn't know (a newer or a
                # foreign file): start afresh; the store rebuilds it from the log.
                names = conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
                for (name,) in names:
                    conn.execute(f'DROP TABLE IF EXISTS "{name}"')
                conn.execute(
                    "CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID"
                )
                row = None
            if row is None:
                self.created = True
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute("INSERT INTO meta VALUES('schema', ?)", (SCHEMA_VERSION,))
                conn.execute("INSERT OR IGNORE INTO meta VALUES('clock', 0)")
            else:
                migrate(conn, row[0])
                # Tables and indexes added since the file was made (damage, inspect's
                # per-agent log seeks): every statement is CREATE … IF NOT EXISTS.
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: holds the index's one write lock until it ends."""
        conn = self._connect()
        # SQLite's busy handler makes waiting writers sleep and poll, which is unfair
        # (p99 of seconds under load); threads of one process queue on a lock instead.
        with self._writer:
            if self._queue < 0:
                self._queue = os.open(self._queue_path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self._queue, fcntl.LOCK_EX)
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield conn
                    conn.execute("COMMIT")
                    self._checkpoints.noted()
                except BaseException:
                    # A failed COMMIT (a full disk) leaves the transaction open.
                    if conn.in_transaction:
                        with contextlib.suppress(sqlite3.Error):
                            conn.execute("ROLLBACK")
                    raise
            finally:
                fcntl.flock(self._queue, fcntl.LOCK_UN)

    def write_session(self) -> _Writing:
        """``write`` as a ``base.WriteSession``: the Index seam's way in (``_Writing``)."""
        return _Writing(self)

    def _begin_write(self) -> sqlite3.Connection:
        """``write``'s start, for ``_Writing``: the thread's connection in BEGIN
        IMMEDIATE, the write lock and the file's flock held (released on failure)."""
        conn = self._connect()
        self._writer.acquire()
        try:
            if self._queue < 0:
                self._queue = os.open(self._queue_path, os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(self._queue, fcntl.LOCK_EX)
            try:
                conn.execute("BEGIN IMMEDIATE")
            except BaseException:
                fcntl.flock(self._queue, fcntl.LOCK_UN)
                raise
        except BaseException:
            self._writer.release()
            raise
        return conn

    def _end_write(self, conn: sqlite3.Connection, failed: bool) -> None:
        """``write``'s end, for ``_Writing``: COMMIT (ROLLBACK when the body ``failed``
        or COMMIT did), then the flock and the write lock released."""
        try:
            try:
                if not failed:
                    conn.execute("COMMIT")
                    self._checkpoints.noted()
            finally:
                # A failed COMMIT (a full disk) leaves the transaction open.
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
        finally:
            fcntl.flock(self._queue, fcntl.LOCK_UN)
            self._writer.release()

    @contextmanager
    def read_session(self) -> Iterator[SqliteRead]:
        """``read`` as a ``base.ReadSession``: the Index seam's way in. Spelled out
        rather than ``with self.read()``: a nested context manager is a few µs of every
        read by path, which is itself only tens of µs."""
        conn = self._connect()
        conn.execute("BEGIN")
        try:
            yield SqliteRead(conn, self.flush_search)
        finally:
            conn.execute("COMMIT")

    def statement_session(self) -> _OneStatement:
        """A session for one statement, in autocommit mode: SQLite reads a single
        statement from one snapshot, so no BEGIN/COMMIT is needed around it."""
        return self._one_statement

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every query inside sees one snapshot."""
        conn = self._connect()
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")


class _Writing:
    """``write_session``'s context manager: ``write`` spelled as a class, where it was
    two nested generator-based context managers (``write``, then the session around
    it), a few thousand instructions of every commit."""

    __slots__ = ("_index", "_session")

    def __init__(self, index: Index) -> None:
        self._index = index

    def __enter__(self) -> SqliteWrite:
        index = self._index
        self._session = session = SqliteWrite(index._begin_write(), index.flush_search)
        return session

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        session = self._session
        self._index._end_write(session.conn, kind is not None)
        if kind is None:
            self._index._idle.noted(session.marked)


class _OneStatement:
    """``statement_session``'s context manager: one object per index, stateless (so
    shared by every thread and nesting), as a class rather than a generator-based
    context manager, whose setup was a few µs of every read by path."""

    __slots__ = ("_index",)

    def __init__(self, index: Index) -> None:
        self._index = index

    def __enter__(self) -> SqliteRead:
        # The thread's connection's own session (made with it): holds nothing per use.
        index = self._index
        index._connect()
        one: SqliteRead = index._local.one
        return one

    def __exit__(self, *exc: object) -> None:
        return None


def _usable(conn: sqlite3.Connection) -> bool:
    """True if ``conn`` opened an index of this schema (not a stranger's file)."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
    except sqlite3.DatabaseError:
        return False
    return row is not None and row[0] == SCHEMA_VERSION


def _enable_wal(conn: sqlite3.Connection) -> None:
    # Switching a new database to WAL needs it exclusively, and SQLite answers "locked"
    # at once (no busy handler) while another process opens it too: retry briefly.
    # Once set, WAL mode is stored in the file and this returns at once.
    deadline = time.monotonic() + 30
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def file_is_current(path: Path) -> bool:
    """True if ``path`` holds an index of this schema, read without opening it for
    writing (no lock taken, nothing created)."""
    if not path.exists():
        return False
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            row = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return False
    return row is not None and row[0] == SCHEMA_VERSION
