"""An append's few checks (canonical/segments.py): what it skips, and what it still finds.

An append to a tail this process knows makes seven system calls: the exclusive
``flock`` and its release, one ``fstat`` of the tail (still linked, not shorter), one
``pread`` of the zeros where the next frame goes, one ``stat`` for a one-file entry of
the revision, the frame's ``pwrite`` and its ``fdatasync``. It no longer ``fstat``s the
lock file: a linked tail means a linked lock, since memfs removes a folder only after
its last erase unlinked every segment. These tests prove the count, and that the
skipped look is still made when it matters (another process's append, a whole log
erased and begun again by another process, an agent erased and made again), and that
a one-file entry put into a live folder by hand is still found.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from forked import in_forked_child
from memfs.canonical import layout
from memfs.canonical.backend import LocalBackend
from memfs.core.store import Store
from segment_files import entry_revisions, segment_files

AGENT = "team/checks"


def key(revision: int) -> str:
    return layout.log_key(AGENT, revision)


def entry(revision: int, who: str = "me") -> bytes:
    return json.dumps({"revision": revision, "who": who}).encode() + b"\n"


def count_calls(monkeypatch: pytest.MonkeyPatch, counts: Counter[str]) -> None:
    def wrap(module: Any, name: str) -> None:
        real: Callable[..., Any] = getattr(module, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)

    for name in ("stat", "fstat", "lstat", "open", "listdir", "scandir", "pread", "pwrite"):
        wrap(os, name)
    for name in ("fdatasync", "fsync", "ftruncate", "getpid"):
        wrap(os, name)
    for name in ("fcntl", "flock"):
        wrap(fcntl, name)


def test_an_append_to_a_known_tail_makes_seven_system_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = LocalBackend(tmp_path)
    for revision in (1, 2):  # the folder, the segment and its zero tail exist from here
        assert backend.put_if_absent(key(revision), entry(revision))
    counts: Counter[str] = Counter()
    count_calls(monkeypatch, counts)
    appends = 10
    for revision in range(3, 3 + appends):
        assert backend.put_if_absent(key(revision), entry(revision))
    monkeypatch.undo()
    per = {name: n / appends for name, n in counts.items()}
    # Taken and released; the tail's fstat; the zeros where the frame goes; a one-file
    # entry of the revision; the frame and its sync. No fstat of the lock file.
    expected = {"flock": 2, "fstat": 1, "pread": 1, "stat": 1, "pwrite": 1, "fdatasync": 1}
    assert per == expected, per
    assert LocalBackend(tmp_path).get(key(12)) == entry(12)


def test_an_append_after_another_process_s_reads_it_first(tmp_path: Path) -> None:
    # This process knows the tail up to revision 2; a child appends 3 behind its back.
    backend = LocalBackend(tmp_path)
    for revision in (1, 2):
        assert backend.put_if_absent(key(revision), entry(revision))

    def child() -> str:
        return str(LocalBackend(tmp_path).put_if_absent(key(3), entry(3, "child")))

    assert in_forked_child(child) == "True"
    # The zeros where this process would write are gone: it reads the child's frame,
    # refuses the revision the child took, and appends after it.
    assert not backend.put_if_absent(key(3), entry(3))
    assert backend.put_if_absent(key(4), entry(4))
    assert entry_revisions(tmp_path, AGENT) == [1, 2, 3, 4]
    fresh = LocalBackend(tmp_path)
    assert [fresh.get(key(r)) for r in (3, 4)] == [entry(3, "child"), entry(4)]


def test_a_log_erased_and_begun_again_elsewhere_is_not_appended_to_its_old_file(
    tmp_path: Path,
) -> None:
    # Another process erases every entry (its last erase unlinks the segment, the
    # lock file stays) and begins the log again in a new segment. This process's tail
    # still holds zeros where its next frame would go, but is no longer linked.
    backend = LocalBackend(tmp_path)
    for revision in (1, 2):
        assert backend.put_if_absent(key(revision), entry(revision))
    (old,) = segment_files(tmp_path, AGENT)
    old_inode = old.stat().st_ino

    def child() -> str:
        other = LocalBackend(tmp_path)
        for revision in (1, 2):
            other.delete(key(revision))
        return str(other.put_if_absent(key(1), entry(1, "child")))

    assert in_forked_child(child) == "True"
    assert not backend.put_if_absent(key(1), entry(1))
    assert backend.put_if_absent(key(2), entry(2))
    (segment,) = segment_files(tmp_path, AGENT)
    assert segment.stat().st_ino != old_inode
    fresh = LocalBackend(tmp_path)
    assert [fresh.get(key(r)) for r in (1, 2)] == [entry(1, "child"), entry(2)]


def test_an_agent_erased_and_made_again_elsewhere_gets_the_new_folder_s_lock(
    tmp_path: Path,
) -> None:
    # Another process erases the agent (every log key, then the folder with its lock
    # file) and makes it again. This process's next commit appends to the new folder's
    # segment (under the new lock file), not to the unlinked one it knew.
    store = Store(tmp_path)
    try:
        store.create_agent(AGENT)
        store.write(AGENT, "/memories/a.md", b"first life", actor="t")

        def child() -> str:
            other = Store(tmp_path)
            try:
                other.erase_agent(AGENT)
                other.create_agent(AGENT)
                return str(other.write(AGENT, "/memories/a.md", b"second", actor="t").revision)
            finally:
                other.close()

        assert in_forked_child(child) == "1"
        written = store.write(AGENT, "/memories/b.md", b"after", actor="t")
        assert written.revision == 2
    finally:
        store.close()
    # Both entries are frames of the new folder's one segment, as a fresh reader sees.
    (segment,) = segment_files(tmp_path, AGENT)
    assert entry_revisions(tmp_path, AGENT) == [1, 2]
    assert segment.parent.joinpath("lock").is_file()
    fresh = Store(tmp_path)
    try:
        assert fresh.read(AGENT, "/memories/a.md").content == b"second"
        assert fresh.read(AGENT, "/memories/b.md").content == b"after"
    finally:
        fresh.close()


def test_a_one_file_entry_put_into_a_live_folder_by_hand_is_taken(tmp_path: Path) -> None:
    # A partial copy (rsync, say) drops entry 3 as a one-file entry beside the segments
    # of a log this process has open and appends to: the append of 3 must find it.
    backend = LocalBackend(tmp_path)
    for revision in (1, 2):
        assert backend.put_if_absent(key(revision), entry(revision))
    (tmp_path / key(3)).write_bytes(entry(3, "by hand"))
    assert not backend.put_if_absent(key(3), entry(3))
    assert backend.put_if_absent(key(4), entry(4))
    assert entry_revisions(tmp_path, AGENT) == [1, 2, 4]
    assert LocalBackend(tmp_path).get(key(3)) == entry(3, "by hand")
