"""The index heals itself: rebuilt at start when missing, empty, of an unknown schema
or behind the log, and rebuilt under a running server whose file was deleted or
replaced. ``index_ready`` is what a readiness probe asks.

A rebuild under a running server is made in a temp file and moved into place whole,
so no process ever reads a half-built index: meanwhile requests get 503 (retryable).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import logging
import os
import secrets
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from memfs.canonical import durable, layout
from memfs.canonical.backend import MissingObject
from memfs.core import maintenance
from memfs.core.store import Store
from memfs.derived import index
from memfs.derived.index import IndexGone

log = logging.getLogger("memfs.healing")

_guard = threading.Lock()


def index_ready(store: Store) -> bool:
    """True when the index is open and caught up; False while it is missing or being
    rebuilt (a rebuild is started if none is under way)."""
    if store.index_rebuilding:
        return False
    try:
        with store.index.read_session():
            pass
    except IndexGone:
        rebuild_in_background(store)
        return False
    return True


def behind(store: Store) -> str | None:
    """Why the index can't be trusted as it is (None if it can): it was just made, or
    an agent on disk is missing from it."""
    if store.index.created:
        if next(maintenance.canonical_agents(store), None) is None:
            store.index.created = False  # a new data folder: nothing to rebuild
            return None
        return "the index was missing, empty or of an unknown schema"
    with store.index.read_session() as ix:
        known = ix.agent_ids()
    for _folder, key in maintenance.canonical_agents(store):
        try:
            record = maintenance.read_record(store, key)
        except (MissingObject, ValueError):
            continue  # a leftover or a damaged record: fsck's to report
        if record["agentId"] not in known:
            return f"agent {record['agentId']!r} is on disk but not in the index"
    return None


def heal(store: Store, progress: Callable[[str], None] | None = None) -> None:
    """Before serving: rebuild the index from the log if it is behind, then apply what
    crashed writers left in the log."""
    note = progress or log.warning
    reason = behind(store)
    if reason is not None:
        note(f"memfs: rebuilding the index from the log: {reason}")
        result = maintenance.reindex(store, progress=note)
        store.index.created = False
        note(f"memfs: index rebuilt: {result.agents} agent(s), {result.commits} commit(s)")
        for agent_id, file, why in result.damaged:
            note(f"memfs: agent {agent_id!r} is damaged ({file}: {why}); run 'memfs fsck'")
    store.sync()


def watch(store: Store) -> None:
    """Rebuild the index in the background whenever one of ``store``'s sessions finds
    its file deleted or replaced (a serving process calls this once)."""
    store.on_index_replaced = functools.partial(rebuild_in_background, store)


def rebuild_in_background(store: Store) -> None:
    """Start rebuilding a deleted or replaced index (once per process at a time)."""
    with _guard:
        if store.index_rebuilding:
            return
        store.index_rebuilding = True
    threading.Thread(
        target=_rebuild, args=(store,), name="memfs-index-rebuild", daemon=True
    ).start()


def _rebuild(store: Store) -> None:
    path = layout.index_path(store.data_dir)
    try:
        with _exclusive(path.with_name(path.name + ".rebuild")):
            if not _usable(path):
                _build_beside(store, path)
            with contextlib.suppress(FileNotFoundError):
                store.healed_inode = os.stat(path).st_ino
            heal(store)  # a replaced file may be behind the log: catch it up
    except Exception:
        log.exception("rebuilding the index failed; the next request tries again")
    finally:
        store.index_rebuilding = False


def _build_beside(store: Store, path: Path) -> None:
    tmp = path.with_name(f"{path.name}.rebuild-{secrets.token_hex(4)}")
    log.warning("memfs: the index %s is gone or replaced: rebuilding it from the log", path)
    side = Store(store.data_dir, backend=store.backend, index_file=tmp, worktree=store.worktree)
    try:
        result = maintenance.reindex(side, progress=log.warning)
    finally:
        side.close()
        Path(f"{tmp}.lock").unlink(missing_ok=True)
    # A stale write-ahead log at the final name belongs to the old file.
    for suffix in ("-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    os.replace(tmp, path)
    durable.fsync_dir(path.parent)
    log.warning("memfs: index rebuilt: %d agent(s), %d commit(s)", result.agents, result.commits)


def _usable(path: Path) -> bool:
    return index.file_is_current(path)


@contextlib.contextmanager
def _exclusive(lock: Path) -> Iterator[None]:
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
