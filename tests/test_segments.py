"""Log entries in segment files (canonical/segments.py) behind LocalBackend's log keys.

Proves: one fdatasync per appended entry; a torn tail is never served and is cut by
the next appender; a damaged frame is Damaged (never cut, never served) and fsck
--repair restores it; an append whose fdatasync fails is not acknowledged and leaves
no frame; sealed segments are never written again; racing processes create each key
exactly once; erasure leaves no byte; symlinks are refused; a data folder written
with one file per entry (the old format) opens, serves and goes on in segments.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from memfs.canonical import layout, segments
from memfs.canonical.backend import LocalBackend, MissingObject
from memfs.core import backup, maintenance
from memfs.core.store import Store
from memfs.errors import Damaged, SymlinkRefused
from segment_files import (
    entry_revisions,
    flip_entry,
    frames,
    segment_files,
    segment_folder,
    used,
    write_at_end,
)
from servers_real import memfs_cli

AGENT = "team/seg"
FIXTURE = Path(__file__).resolve().parent / "fixtures" / "old_log_format"


def key(revision: int, agent: str = AGENT) -> str:
    return layout.log_key(agent, revision)


def entry(revision: int, tag: str = "") -> bytes:
    return json.dumps({"revision": revision, "tag": tag, "pad": "x" * 300}).encode() + b"\n"


def fill(backend: LocalBackend, count: int) -> None:
    for revision in range(1, count + 1):
        assert backend.put_if_absent(key(revision), entry(revision))


def test_an_append_is_one_fdatasync_and_no_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = LocalBackend(tmp_path)
    fill(backend, 2)  # the first one made the segment (and paid its folder fsync)
    calls: list[str] = []
    real_fdatasync, real_fsync = os.fdatasync, os.fsync
    monkeypatch.setattr(
        os, "fdatasync", lambda fd: (calls.append("fdatasync"), real_fdatasync(fd))[1]
    )
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd))[1])
    for revision in range(3, 8):
        assert backend.put_if_absent(key(revision), entry(revision))
    assert calls == ["fdatasync"] * 5
    # No file per entry: one segment holds them all, in order.
    assert not list((tmp_path / layout.log_prefix(AGENT)).glob("*.json"))
    assert entry_revisions(tmp_path, AGENT) == list(range(1, 8))
    assert LocalBackend(tmp_path).get(key(5)) == entry(5)


def test_another_process_sees_new_entries_and_lists_them_in_key_order(tmp_path: Path) -> None:
    mine, theirs = LocalBackend(tmp_path), LocalBackend(tmp_path)
    fill(mine, 3)
    assert list(theirs.list(layout.log_prefix(AGENT))) == [key(r) for r in (1, 2, 3)]
    assert mine.put_if_absent(key(4), entry(4))
    assert theirs.exists(key(4)) and theirs.get(key(4)) == entry(4)
    assert not theirs.put_if_absent(key(4), b"another")
    assert theirs.put_if_absent(layout.agent_key(AGENT), b"{}")
    # The agent's other objects list around the log, the segments folder never.
    listed = list(mine.list(layout.agent_prefix(AGENT)))
    assert listed == [layout.agent_key(AGENT), *[key(r) for r in (1, 2, 3, 4)]]
    assert list(mine.list(layout.log_prefix(AGENT), start_after=key(2))) == [key(3), key(4)]


@pytest.mark.parametrize(
    "torn",
    [
        segments.frame(4, entry(4))[:7],  # a header cut short
        segments.frame(4, entry(4))[:-5],  # a payload cut short
        bytes(64),  # zeros where the frame was to be
    ],
)
@pytest.mark.parametrize("zero_tail", [True, False], ids=["in the zero tail", "old format"])
def test_a_torn_tail_is_never_served_and_the_next_append_cuts_it(
    tmp_path: Path, torn: bytes, zero_tail: bool
) -> None:
    fill(LocalBackend(tmp_path), 3)
    (segment,) = segment_files(tmp_path, AGENT)
    whole = used(segment)
    if not zero_tail:  # a segment an older memfs wrote: its frames end at its size
        segment.write_bytes(whole)
    write_at_end(segment, torn)  # what a crash in the middle of an append leaves
    before = segment.read_bytes()
    reader = LocalBackend(tmp_path)
    assert list(reader.list(layout.log_prefix(AGENT))) == [key(r) for r in (1, 2, 3)]
    with pytest.raises(MissingObject):
        reader.get(key(4))
    assert segment.read_bytes() == before  # a reader cuts nothing
    writer = LocalBackend(tmp_path)
    assert writer.put_if_absent(key(4), entry(4, "after"))
    assert used(segment) == whole + segments.frame(4, entry(4, "after"))
    assert segment.read_bytes().rstrip(b"\0") == used(segment)  # the torn bytes are gone
    assert reader.get(key(4)) == entry(4, "after")


def test_a_damaged_frame_is_damage_never_cut_and_fsck_repairs_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = Store(data)
    try:
        store.create_agent(AGENT)
        for n in range(3):
            store.write(AGENT, f"/memories/{n}.md", f"words {n}".encode(), actor="t")
        flip_entry(data, AGENT, 2, b"words 1", b"wordz 1")
        (segment,) = segment_files(data, AGENT)
        size = len(used(segment))
        other = LocalBackend(data)
        with pytest.raises(Damaged, match="memfs fsck") as caught:
            other.get(key(2))
        assert caught.value.file == key(2) and "checksum" in caught.value.reason
        assert other.get(key(3))  # its neighbours read fine
        assert not other.put_if_absent(key(2), b"x")  # still taken: create-if-absent
        assert other.put_if_absent(key(5), entry(5)) is True  # appends after it
        assert len(used(segment)) > size
        report = maintenance.fsck(store)
        assert any(key(2) in d and "checksum does not match" in d for d in report.damaged)
        assert maintenance.fsck(store, repair=True).damaged == []
        assert json.loads(LocalBackend(data).get(key(2)))["revision"] == 2
    finally:
        store.close()


def test_unreadable_bytes_with_frames_after_them_are_damage(tmp_path: Path) -> None:
    fill(LocalBackend(tmp_path), 3)
    (segment,) = segment_files(tmp_path, AGENT)
    raw = bytearray(segment.read_bytes())
    second = frames(segment)[1][2]
    raw[second : second + 4] = b"????"  # the second frame's magic: no header there now
    segment.write_bytes(bytes(raw))
    backend = LocalBackend(tmp_path)
    assert backend.get(key(1)) == entry(1)
    with pytest.raises(Damaged, match="memfs fsck"):
        backend.get(key(3))
    with pytest.raises(Damaged):
        backend.put_if_absent(key(4), entry(4))
    assert segment.read_bytes() == bytes(raw)  # nothing cut, nothing appended


def test_an_append_whose_fdatasync_fails_leaves_no_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = LocalBackend(tmp_path)
    fill(backend, 2)
    (segment,) = segment_files(tmp_path, AGENT)
    before = segment.read_bytes()
    real = os.fdatasync
    failures = [OSError(errno.EIO, "Input/output error")]

    def failing(fd: int) -> None:
        if failures:
            raise failures.pop()
        real(fd)

    monkeypatch.setattr(os, "fdatasync", failing)
    with pytest.raises(OSError, match="Input/output"):
        backend.put_if_absent(key(3), entry(3, "reported failed"))
    assert segment.read_bytes() == before  # the frame was cut off again
    assert not LocalBackend(tmp_path).exists(key(3))
    assert not backend.exists(key(3))
    assert backend.put_if_absent(key(3), entry(3, "retried"))
    assert LocalBackend(tmp_path).get(key(3)) == entry(3, "retried")


def test_sealed_segments_are_never_written_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segments, "SEAL_COUNT", 2)
    backend = LocalBackend(tmp_path)
    fill(backend, 5)
    files = segment_files(tmp_path, AGENT)
    assert [f.name for f in files] == [segments.segment_name(n) for n in (1, 2, 3)]
    assert [[r for _m, r, _o, _p in frames(f)] for f in files] == [[1, 2], [3, 4], [5]]
    sealed = {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in files[:2]}
    for revision in range(6, 9):
        assert backend.put_if_absent(key(revision), entry(revision))
    assert {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in files[:2]} == sealed
    # A sealed segment cut short is damage, not a tail to cut.
    files[0].write_bytes(files[0].read_bytes()[:-3])
    with pytest.raises(Damaged):
        LocalBackend(tmp_path).get(key(9))


_RACER = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    from memfs.canonical import layout, segments
    from memfs.canonical.backend import LocalBackend

    root, me, go, count = Path(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
    segments.SEAL_COUNT = 7  # segments are started (and raced for) along the way
    backend = LocalBackend(root)
    deadline = time.monotonic() + 120
    while not os.path.exists(go):
        assert time.monotonic() < deadline
        time.sleep(0.001)
    won = [r for r in range(1, count + 1)
           if backend.put_if_absent(layout.log_key("team/seg", r), f"{me}:{r}".encode())]
    print(json.dumps(won))
    """
)


def test_racing_processes_create_each_entry_exactly_once(tmp_path: Path) -> None:
    racers, count = 4, 60
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, str(tmp_path / "data"), f"p{i}", str(go), str(count)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(racers)
    ]
    go.touch()
    won: dict[str, list[int]] = {}
    for i, proc in enumerate(procs):
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        won[f"p{i}"] = json.loads(out)
    winners = sorted(r for revisions in won.values() for r in revisions)
    assert winners == list(range(1, count + 1))  # one winner per key, none lost
    backend = LocalBackend(tmp_path / "data")
    for who, revisions in won.items():
        for revision in revisions:
            assert backend.get(key(revision)) == f"{who}:{revision}".encode()
    assert sorted(entry_revisions(tmp_path / "data", AGENT)) == list(range(1, count + 1))
    # Sealed (raced for along the way): each ends at its last frame, zero tail cut off.
    files = segment_files(tmp_path / "data", AGENT)
    assert len(files) > 1 and all(f.read_bytes() == used(f) for f in files[:-1])


def test_erasing_entries_leaves_no_byte_of_them(tmp_path: Path) -> None:
    backend = LocalBackend(tmp_path)
    for revision in (1, 2, 3):
        assert backend.put_if_absent(key(revision), entry(revision, f"secret-{revision}"))
    backend.delete(key(2))
    (segment,) = segment_files(tmp_path, AGENT)
    assert b"secret-2" not in segment.read_bytes()
    assert backend.get(key(3)) == entry(3, "secret-3")
    assert not LocalBackend(tmp_path).exists(key(2))
    assert backend.put_if_absent(key(2), entry(2, "again"))  # absent again
    for revision in (1, 2, 3):
        backend.delete(key(revision))
    assert segment_files(tmp_path, AGENT) == []
    assert list(backend.list(layout.agent_prefix(AGENT))) == []
    assert not [p for p in tmp_path.rglob("*") if p.is_file() and b"secret" in p.read_bytes()]


def test_symlinks_in_the_log_folder_are_refused(tmp_path: Path) -> None:
    data, outside = tmp_path / "data", tmp_path / "outside"
    outside.mkdir()
    backend = LocalBackend(data)
    fill(backend, 1)
    folder = segment_folder(data, AGENT)
    shutil.rmtree(folder)
    folder.symlink_to(outside)
    for attempt in (LocalBackend(data), backend):
        with pytest.raises(SymlinkRefused):
            attempt.put_if_absent(key(2), entry(2))
    assert list(outside.iterdir()) == []
    folder.unlink()
    folder.mkdir()
    (folder / segments.segment_name(1)).symlink_to(outside / "x.seg")
    with pytest.raises(SymlinkRefused):
        LocalBackend(data).put_if_absent(key(2), entry(2))
    assert list(outside.iterdir()) == []


def test_an_old_one_file_per_entry_folder_opens_and_goes_on_in_segments(tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(FIXTURE, data)
    old_files = sorted(p.relative_to(data) for p in data.rglob("*.json"))
    store = Store(data)
    try:
        result = maintenance.reindex(store)
        assert (result.agents, result.commits, result.damaged) == (2, 6, [])
        assert store.read("team/old", "/memories/notes/a.md").content == b"# A\nsecond\n"
        assert store.read("team/old", "/memories/notes/big.md").content.startswith(b"# Big")
        written = store.write("team/old", "/memories/notes/c.md", b"new", actor="t")
        assert written.revision == 6
        assert entry_revisions(data, "team/old") == [6]  # the new entry is a frame
        keys = list(store.backend.list(layout.log_prefix("team/old")))
        assert keys == [layout.log_key("team/old", r) for r in range(1, 7)]
        assert maintenance.fsck(store).ok
    finally:
        store.close()
    # Nothing of the old format was moved or rewritten.
    for rel in old_files:
        assert (data / rel).read_bytes() == (FIXTURE / rel).read_bytes()
    # A backup holds one file per entry (old and new alike); it restores and serves.
    saved, restored = tmp_path / "backup", tmp_path / "restored"
    backup.backup(data, saved)
    assert (saved / layout.log_key("team/old", 6)).is_file()
    assert not list(saved.rglob(f"*{segments.SUFFIX}"))  # as a bucket holds them
    assert backup.restore(saved, restored) > 0
    assert memfs_cli("reindex", data=restored).returncode == 0
    cat = memfs_cli("cat", "team/old", "/memories/notes/c.md", data=restored)
    assert cat.returncode == 0 and cat.stdout == "new", cat.stderr
    assert memfs_cli("fsck", data=restored).returncode == 0


def test_a_backend_keeps_few_logs_open_and_reopens_the_others(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segments.Segments, "OPEN_LOGS", 2)
    backend = LocalBackend(tmp_path)
    agents = [f"team/a{i}" for i in range(6)]
    fds_before = len(os.listdir("/proc/self/fd"))
    for revision in (1, 2):
        for agent in agents:
            assert backend.put_if_absent(key(revision, agent), entry(revision, agent))
    # Two logs open (folder, lock, one segment each), not six: a server of many agents
    # stays far below its descriptor limit.
    assert len(os.listdir("/proc/self/fd")) - fds_before <= 2 * 3
    for agent in agents:
        assert backend.get(key(1, agent)) == entry(1, agent)
        assert not backend.put_if_absent(key(2, agent), b"again")
        assert entry_revisions(tmp_path, agent) == [1, 2]


def test_erasing_the_newest_segment_s_frames_never_reopens_a_sealed_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(segments, "SEAL_COUNT", 2)
    backend = LocalBackend(tmp_path)
    fill(backend, 3)  # segments 1: [1, 2], 2: [3]
    first = segment_files(tmp_path, AGENT)[0]
    sealed = first.read_bytes()
    backend.delete(key(3))  # the quarantine of a newest entry does this
    assert backend.put_if_absent(key(3), entry(3, "again"))
    assert first.read_bytes() == sealed
    assert LocalBackend(tmp_path).get(key(3)) == entry(3, "again")
    for revision in (1, 3, 2):  # any order: the last one takes every segment with it
        backend.delete(key(revision))
    assert segment_files(tmp_path, AGENT) == []
