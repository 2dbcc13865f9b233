"""The index's WAL checkpoints run off the commit path (derived/index/checkpointer.py).

A writer's COMMIT never copies the WAL into the main file (SQLite's auto-checkpoint is
only a backstop, far past where the thread works); the checkpointer thread does, and
restarts the WAL, so sustained writes keep it bounded; a forked child starts its own
thread; close() stops it.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

from forked import in_forked_child
from memfs.derived.index import connection
from memfs.derived.index.connection import Index

PAGE = 4096
FRAME = PAGE + 24  # a WAL frame: its header and one page


def wal_frames(ix: Index) -> int:
    """Frames the WAL file has room for (its size: it never shrinks by itself)."""
    try:
        size = os.stat(str(ix.path) + "-wal").st_size
    except FileNotFoundError:
        return 0
    return max(0, size - 32) // FRAME


def write_blobs(ix: Index, count: int, size: int, start: int = 0) -> None:
    """``count`` write transactions of one cached content of ``size`` bytes each."""
    for i in range(start, start + count):
        with ix.write() as conn:
            conn.execute(
                "INSERT INTO blobs(agent_id, sha256, content) VALUES(?,?,?)",
                ("a", f"{i:064x}", os.urandom(size)),
            )


def wait_for(check: object, what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_a_commit_never_checkpoints_the_wal_itself(tmp_path: Path) -> None:
    # Past SQLite's old 10,000-page auto-checkpoint, with the checkpointer held, the
    # main file does not grow: no COMMIT copied the WAL into it. Released, the thread
    # copies it and the main file holds every row.
    ix = Index(tmp_path / "index.sqlite")
    held = threading.Event()
    real = ix._checkpoints._checkpoint

    def checkpoint() -> tuple[int, int, int]:
        held.wait()
        return real()

    ix._checkpoints._checkpoint = checkpoint
    try:
        main = ix.path.stat().st_size
        count = 0
        while wal_frames(ix) < 12_000:
            write_blobs(ix, 100, 60_000, start=count)
            count += 100
        assert connection.WAL_AUTOCHECKPOINT > 12_000
        assert ix._checkpoints.runs >= 1  # woken, waiting on the test
        assert ix.path.stat().st_size == main
        held.set()
        wait_for(ix._checkpoints.settled, "the checkpoint")
        assert ix.path.stat().st_size > main + count * 60_000
        plain = sqlite3.connect(f"file:{ix.path}?mode=ro&immutable=1", uri=True)
        try:
            # The main file alone (immutable: the WAL ignored) holds every row.
            assert plain.execute("SELECT COUNT(*) FROM blobs").fetchone()[0] == count
        finally:
            plain.close()
    finally:
        held.set()
        ix.close()


def test_sustained_writes_keep_the_wal_bounded(tmp_path: Path) -> None:
    # 30 blocks of 64 write transactions of ~5 pages: without checkpoints the WAL
    # would hold every frame (under the backstop). The thread, woken by each block's
    # last commit, copies the WAL and restarts it: it never holds much more than a
    # block's frames.
    ix = Index(tmp_path / "index.sqlite")
    checkpoints = ix._checkpoints
    checkpoints._every, checkpoints._count = 64, 0
    try:
        frames = []
        for block in range(30):
            write_blobs(ix, 64, 12_000, start=block * 64)
            wait_for(checkpoints.settled, "the block's checkpoint")
            frames.append(wal_frames(ix))
        block_frames = frames[0]
        assert checkpoints.runs >= 30
        assert block_frames >= 64 * 4
        assert max(frames) <= 2 * block_frames, frames  # 30 blocks written
    finally:
        ix.close()
    assert checkpoints._thread is None or not checkpoints._thread.is_alive()


def test_close_stops_the_thread_and_a_closed_index_starts_none(tmp_path: Path) -> None:
    ix = Index(tmp_path / "index.sqlite")
    ix._checkpoints._every = 4
    write_blobs(ix, 8, 100)
    thread = ix._checkpoints._thread
    assert thread is not None
    ix.close()
    assert not thread.is_alive()
    assert ix._checkpoints._thread is None


def test_a_forked_child_checkpoints_with_a_thread_of_its_own(tmp_path: Path) -> None:
    ix = Index(tmp_path / "index.sqlite")
    ix._checkpoints._every = 4
    try:
        write_blobs(ix, 8, 100)  # the parent's thread started

        def child() -> str:
            checkpoints = ix._checkpoints
            before = checkpoints.runs
            for _ in range(8):  # commits noted (no SQLite connection across a fork)
                checkpoints.noted()
            deadline = time.monotonic() + 60
            while checkpoints.runs == before and time.monotonic() < deadline:
                time.sleep(0.02)
            return f"{checkpoints.runs - before}"

        report = in_forked_child(child)
        assert int(report) >= 1  # the child's own thread ran its passes
    finally:
        ix.close()
