"""A log's rows built by a worker process while this one writes them (reindex).

Reindex's work on a long log is about half Python (reading and decoding each entry,
building its rows) and half SQLite. Here a forked child does the Python half, exactly
``bulk.bulk_load``'s (``bulk.LogRows``), and sends each batch's commits rows to the
parent as soon as they are made, then every other table's rows at the end; the parent
runs the SQL meanwhile, in its own transaction. The child never touches the index: its
savepoints, its locks and what a failure rolls back are the parent's, as in one
process. An error in the child (a damaged entry, a missing content) is sent back and
raised in the parent as it was raised there.

The child is forked only when it is safe and pays: this process runs no other thread
(a child forked beside other threads may inherit a lock one of them held: a serving
process's background rebuild decodes in-process), the caller says the child may read
the backend itself (a local one; an object store's client and its pooled connections
are not for two processes), and the log is long enough that forking costs less than
the overlap saves (``MIN_ENTRIES``).
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import multiprocessing
import sqlite3
import threading
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from typing import Any

from memfs.derived.index.bulk import LogRows, Tail, bulk_load, write_commits, write_tail

Entry = tuple[str, str, dict[str, Any]]

# Below this many entries (the agent's revision before the reindex), decoding aside
# does not pay for forking the child (measured in docs/benchmarks.md).
MIN_ENTRIES = 2_000
_BATCH = 1_024  # entries per message (about 0.7 MiB of rows for small commits)
_PIPE_BYTES = 1 << 20  # Linux's default upper bound for an unprivileged process


def can_fork() -> bool:
    """True if a child may be forked here safely: the platform forks and this process
    runs one thread (a lock held by another thread would stay held in the child)."""
    return "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1


def load(
    conn: sqlite3.Connection,
    agent: str,
    entries: Callable[[], Iterator[Entry]],
    blob: Callable[[str], bytes],
    prepare: Callable[[], None],
    *,
    expected: int,
    aside: bool,
) -> int:
    """``prepare()`` (it clears the agent's rows), then ``bulk.bulk_load`` of the log
    ``entries()`` reads and decodes: in a worker process, which starts before
    ``prepare``, when ``aside`` (the caller allows it) and ``expected`` (about how
    many entries there are) make it pay and forking is safe, else here. The same rows
    and the same errors either way; returns the number of commits."""
    if not aside or expected < MIN_ENTRIES or not can_fork():
        prepare()
        return bulk_load(conn, agent, entries(), blob)
    return _load_aside(conn, agent, entries, blob, prepare)


def _load_aside(
    conn: sqlite3.Connection,
    agent: str,
    entries: Callable[[], Iterator[Entry]],
    blob: Callable[[str], bytes],
    prepare: Callable[[], None],
) -> int:
    context = multiprocessing.get_context("fork")
    rows_in, rows_out = context.Pipe(duplex=False)
    _widen(rows_out)
    child = context.Process(
        target=_build_rows,
        args=(agent, entries, blob, rows_out),
        name="memfs-reindex-rows",
        daemon=True,
    )
    # Objects the collector would walk in the child are copied on its first write
    # to their pages: frozen, it leaves them alone (the child collects nothing anyway).
    gc.freeze()
    try:
        child.start()
    finally:
        gc.unfreeze()
    rows_out.close()  # the child's end: held open here, it would hide the child's exit
    try:
        prepare()
        tail = _write_as_they_come(conn, rows_in)
        if tail is None:
            raise RuntimeError(f"the reindex worker of {agent!r} stopped ({child.exitcode})")
        write_tail(conn, agent, tail)
        return tail.commits
    finally:
        if child.is_alive():
            child.kill()  # an error here: the child may be blocked sending
        child.join()
        rows_in.close()


def _widen(end: Connection) -> None:
    """Let a pipe hold a whole batch (Linux; 64 KiB by default): every time one side
    blocks on the other costs a wake-up, milliseconds on a busy machine."""
    with contextlib.suppress(OSError, AttributeError):
        fcntl.fcntl(end.fileno(), fcntl.F_SETPIPE_SZ, _PIPE_BYTES)


def _write_as_they_come(conn: sqlite3.Connection, rows: Connection) -> Tail | None:
    """Insert the commits rows the child sends until its tail (None if it stopped
    without one); an error it met is raised here."""
    while True:
        try:
            kind, payload = rows.recv()
        except EOFError:
            return None
        if kind == "commits":
            write_commits(conn, payload)
        elif kind == "tail":
            tail: Tail = payload
            return tail
        else:
            error: BaseException = payload
            raise error


def _build_rows(
    agent: str,
    entries: Callable[[], Iterator[Entry]],
    blob: Callable[[str], bytes],
    out: Connection,
) -> None:
    """The child: build the log's rows, sending the commits rows of every batch of
    entries, then the tail; an exception is sent back, not raised."""
    gc.disable()  # short-lived: a collection would only copy the parent's pages
    built = LogRows(agent, blob)
    try:
        try:
            for n, (key, text, doc) in enumerate(entries(), 1):
                built.add(key, text, doc)
                if n % _BATCH == 0:
                    out.send(("commits", built.take_commits()))
            out.send(("commits", built.take_commits()))
            out.send(("tail", built.tail()))
        except (BrokenPipeError, ConnectionResetError):
            return  # the parent is gone
        except Exception as exc:
            try:
                out.send(("error", exc))
            except Exception:
                out.send(("error", RuntimeError(f"reindex worker: {exc!r}")))
    except (BrokenPipeError, ConnectionResetError):
        return
