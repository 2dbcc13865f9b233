"""A commit's own system calls: what durability and the symlink checks need, no more.

Counted through the ``os`` and ``fcntl`` functions memfs calls (SQLite's own calls
are its business and not counted here). A create of a memory in a folder written
before pays: the segment's exclusive ``flock`` and the index's writer queue (each taken
and released), one ``fdatasync`` and no ``fsync``; the tree file's temp file (one
``open``) renamed into place; one ``open`` probing what stands at the file's name; the
kept folders checked again by inode, one ``stat`` each; one ``pread`` of the segment's
tail where the next frame goes (zeros: nothing appended by others, and not sealed, so
no look for a next segment); no ``getpid`` (the segments' fork check is a fork hook),
no ``fcntl`` (a segment's writability is known when it is opened), no ``fstat`` of the
segment's lock file (the tail's own says it is still linked) and no random bytes
(temp names are this process's id and a counter). Temp names stay unique across a
fork and past a dead process's leftover.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from forked import in_forked_child
from memfs.canonical import durable, layout
from memfs.canonical.backend import LocalBackend
from memfs.core.store import Store
from segment_files import segment_files

AGENT = "team/calls"
CREATES = 20


def note(i: int) -> bytes:
    return f"---\ndescription: note {i}; kept — short\nkind: test\n---\nbody {i}\n".encode()


# The index's background threads (the WAL checkpointer, the idle full-text flush) run
# when they like, in sessions of their own: not a commit's calls, so not counted, and
# the counts stay exact.
BACKGROUND = ("memfs-wal-checkpoint", "memfs-search-flush")


def counting(monkeypatch: pytest.MonkeyPatch, counts: Counter[str]) -> None:
    def wrap(module: Any, name: str) -> None:
        real: Callable[..., Any] = getattr(module, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread().name not in BACKGROUND:
                counts[name] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)

    names = ("stat", "fstat", "open", "pread", "pwrite", "replace", "fdatasync", "fsync")
    for name in (*names, "getpid", "urandom"):
        wrap(os, name)
    for name in ("fcntl", "flock"):
        wrap(fcntl, name)


def test_a_create_makes_only_the_system_calls_durability_and_safety_need(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path, backend=LocalBackend(tmp_path))
    try:
        store.create_agent(AGENT)
        for i in range(3):  # the folders, the segment and the index exist from here on
            store.write(AGENT, f"/memories/docs/warm{i}.md", note(i), actor="test")
        (segment,) = segment_files(tmp_path, AGENT)
        size = segment.stat().st_size
        counts: Counter[str] = Counter()
        counting(monkeypatch, counts)
        for i in range(CREATES):
            store.write(AGENT, f"/memories/docs/n{i}.md", note(i), actor="test")
        monkeypatch.undo()
        # Each fdatasync overwrote the segment's zero tail in place: no size changed,
        # so none needed a journal commit of the file's new size.
        assert segment.stat().st_size == size
    finally:
        store.close()
    per = {name: n / CREATES for name, n in counts.items()}
    assert per.get("fdatasync") == 1 and "fsync" not in per, per
    # The segment's lock and the index's writer queue, each taken and released.
    assert per.get("flock") == 4, per
    assert per.get("open") == 2, per  # the tree file's temp file, the probe of its name
    assert per.get("replace") == 1, per
    for never in ("getpid", "urandom", "fcntl"):
        assert never not in per, per
    # The index file's inode (once per session: 2), the kept folders by inode (data
    # folder, agents, the agent, memories, docs), .memfs and the file's name (symlink
    # checks), and a one-file entry of the revision (1: one put there by hand is
    # taken). No look for a segment after the tail: its zero tail says it is not sealed.
    assert per.get("stat") == 10, per
    # The tail still linked and not shorter (the lock file with it: no fstat of its own).
    assert per.get("fstat") == 1, per
    # The zeros where the next frame goes (nothing appended by others), the frame.
    assert per.get("pread") == 1 and per.get("pwrite") == 1, per
    # Every create is there, as a file and in the log.
    assert sorted(
        p.name for p in (layout.worktree_root(tmp_path, AGENT) / "docs").iterdir()
    ) == sorted([f"n{i}.md" for i in range(CREATES)] + [f"warm{i}.md" for i in range(3)])


def test_an_update_reads_the_file_it_replaces_with_one_fstat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An update probes the tree file it replaces (a hand edit is set aside): one
    ``open``, one ``fstat`` (a regular file, and its size for the read), its read."""
    store = Store(tmp_path, backend=LocalBackend(tmp_path))
    try:
        store.create_agent(AGENT)
        for i in range(CREATES):
            store.write(AGENT, f"/memories/docs/n{i}.md", note(i), actor="test")
        counts: Counter[str] = Counter()
        counting(monkeypatch, counts)
        for i in range(CREATES):
            store.write(AGENT, f"/memories/docs/n{i}.md", note(i + 100), actor="test")
        monkeypatch.undo()
    finally:
        store.close()
    per = {name: n / CREATES for name, n in counts.items()}
    assert per.get("open") == 2, per  # the new temp file, the file it replaces
    # The segment's tail still linked, the replaced file's type and size.
    assert per.get("fstat") == 2, per
    assert per.get("stat") == 10, per
    folder = layout.worktree_root(tmp_path, AGENT) / "docs"
    assert [(folder / f"n{i}.md").read_bytes() for i in range(CREATES)] == [
        note(i + 100) for i in range(CREATES)
    ]


def test_temp_names_stay_unique_past_a_dead_process_leftover(tmp_path: Path) -> None:
    # A process that died with our id (a reused pid) left the very name we'd take next.
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        probe = durable.write_temp_at(fd, b"probe", sync=False)
        prefix, _, counter = probe.rpartition("-")
        leftover = f"{prefix}-{int(counter, 16) + 1:x}"
        (tmp_path / leftover).write_bytes(b"a dead process's")
        name = durable.write_temp_at(fd, b"mine", sync=False)
    finally:
        os.close(fd)
    assert name not in (probe, leftover)
    assert (tmp_path / leftover).read_bytes() == b"a dead process's"
    assert (tmp_path / name).read_bytes() == b"mine"
    assert durable.is_temp_name(name)


def test_a_forked_child_appends_with_its_own_lock_and_temp_names(tmp_path: Path) -> None:
    # A child shares its parent's open files (and their flock locks): it must start
    # its segments afresh, and name its temp files apart from its parent's.
    backend = LocalBackend(tmp_path)
    assert backend.put_if_absent(layout.log_key(AGENT, 1), b"one\n")
    folder = os.open(tmp_path, os.O_RDONLY)
    parent_name = durable.write_temp_at(folder, b"parent", sync=False)

    def child() -> str:
        won = backend.put_if_absent(layout.log_key(AGENT, 2), b"two\n")
        return f"{won} {durable.write_temp_at(folder, b'child', sync=False)}"

    report = in_forked_child(child)
    os.close(folder)
    won, child_name = report.split()
    assert won == "True"
    assert child_name != parent_name and (tmp_path / parent_name).read_bytes() == b"parent"
    # The parent sees the child's entry and appends after it.
    assert backend.get(layout.log_key(AGENT, 2)) == b"two\n"
    assert not backend.put_if_absent(layout.log_key(AGENT, 2), b"again\n")
    assert backend.put_if_absent(layout.log_key(AGENT, 3), b"three\n")
    assert LocalBackend(tmp_path).get(layout.log_key(AGENT, 3)) == b"three\n"
