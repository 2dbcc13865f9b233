"""Crash safety with real processes: SIGKILL a committing child at random instants.

A child process (tests/helpers/crash_child.py) commits in a loop on one data folder
(small and > 16 KiB contents, multi-path commits, deletes, renames) and prints each
commit only after the store acknowledged it. The parent kills it with SIGKILL at
random moments, restarts it on the same folder, and at the end proves that:

- every acknowledged commit is in the log and in the memory's history;
- the log is contiguous 1..N and every entry beyond the acknowledged ones is at most
  the one commit in flight when a child died;
- every final file is whole (log entries and agent records parse as JSON, blobs hash
  to their names, working-tree files hold a version the log recorded);
- the head of every path is what the log says, in the index and in the working tree;
- ``memfs fsck --repair`` exits 0 and then ``memfs fsck`` says ok.
"""

from __future__ import annotations

import hashlib
import json
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from memfs.canonical import durable, layout, segments
from memfs.core.store import Store
from memfs.derived.worktree import WorkTree
from memfs.domain.records import VersionRow
from memfs.errors import Conflict, NotFound
from segment_files import frames, segment_files, used

HELPERS = Path(__file__).resolve().parent / "helpers"
AGENT = "crash/agent"  # as in helpers/crash_child.py
ROUNDS = 24
WAIT = 120  # seconds; generous for a loaded machine, never reached when all is well


def _memfs(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memfs.cli", "--data", str(data), *args],
        capture_output=True,
        text=True,
        timeout=WAIT,
        check=False,
    )


class _Child:
    """One run of the committing child; collects its acknowledged lines."""

    def __init__(self, data: Path, seed: int) -> None:
        self.lines: list[str] = []
        self.ready = threading.Event()
        self.proc = subprocess.Popen(
            [sys.executable, str(HELPERS / "crash_child.py"), str(data), str(seed)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            if not raw.endswith(b"\n"):
                break  # a line cut short by the kill was never a whole acknowledgement
            line = raw.decode()
            if '"ready"' in line:
                self.ready.set()
            else:
                self.lines.append(line)
        self.ready.set()

    def kill(self) -> tuple[list[dict[str, Any]], bytes]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=WAIT)
        self._reader.join(timeout=WAIT)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        err = self.proc.stderr.read()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return [json.loads(line) for line in self.lines], err


def _read_log(data: Path) -> dict[int, dict[str, Any]]:
    """Every published log entry, read straight from the segment files (the truth):
    every whole frame has its checksum and parses; only the newest segment may end in
    a torn frame (a killed writer's append, never acknowledged: cut short at the file's
    end, or a frame in the zero tail whose checksum fails, only zeros after it)."""
    entries: dict[int, dict[str, Any]] = {}
    files = segment_files(data, AGENT)
    for i, file in enumerate(files):
        raw = file.read_bytes()
        offset = 0
        while offset < len(raw):
            header = raw[offset : offset + segments.HEADER.size]
            whole = len(header) == segments.HEADER.size
            magic, length, _crc, revision = (
                segments.HEADER.unpack(header) if whole else (b"", 0, 0, 0)
            )
            end = offset + segments.HEADER.size + length
            if magic == segments.ZERO:
                assert i == len(files) - 1, f"{file} has a zero tail but is sealed"
                assert raw.count(0, offset) == len(raw) - offset, f"{file} after {offset}"
                break  # the zero tail: where the next append goes
            if magic != segments.MAGIC or end > len(raw):
                assert i == len(files) - 1, f"{file} is torn at {offset} but sealed"
                break  # a torn tail: the next writer cuts it
            payload = raw[offset + segments.HEADER.size : end]
            if segments.frame(revision, payload) != raw[offset:end] and i == len(files) - 1:
                # Torn in the zero tail: only zeros follow it (the next writer zeroes it).
                assert raw.count(0, end) == len(raw) - end, f"{file} at {offset}"
                break
            assert segments.frame(revision, payload) == raw[offset:end], f"{file} at {offset}"
            doc = json.loads(payload)
            assert doc["revision"] == revision and doc["agentId"] == AGENT
            assert revision not in entries, f"revision {revision} twice"
            entries[revision] = doc
            offset = end
    return entries


def _check_final_files(data: Path, entries: dict[int, dict[str, Any]]) -> None:
    """No final name ever holds a partial file."""
    agent_dir = layout.agent_folder(data, AGENT)
    record = agent_dir / ".memfs" / "agent.json"
    if record.exists():
        assert json.loads(record.read_bytes())["agentId"] == AGENT
    objects = agent_dir / ".memfs" / "objects"
    if objects.is_dir():
        for file in objects.rglob("*"):
            if file.is_file() and not durable.is_temp_name(file.name):
                name = file.parent.name + file.name
                assert hashlib.sha256(file.read_bytes()).hexdigest() == name, file
    shas: dict[str, set[str]] = {}
    for doc in entries.values():
        for change in doc["changes"]:
            if change["after"]:
                shas.setdefault(change["path"], set()).add(change["after"])
    for path, file in WorkTree(agent_dir / "memories").scan():
        digest = hashlib.sha256(file.read_bytes()).hexdigest()
        assert digest in shas.get(path, set()), f"{file} holds bytes no commit recorded"


def _head(entries: dict[int, dict[str, Any]]) -> tuple[dict[str, str], dict[str, int]]:
    """Replay the log: current sha of every path, and the last revision touching it."""
    head: dict[str, str] = {}
    touched: dict[str, int] = {}
    for revision in sorted(entries):
        for change in entries[revision]["changes"]:
            touched[change["path"]] = revision
            if change["after"] is None:
                head.pop(change["path"], None)
            else:
                head[change["path"]] = change["after"]
    return head, touched


def _history(store: Store, path: str) -> list[VersionRow]:
    """Every version of ``path``, page by page: a path busy enough in the kill rounds
    has more than one page (200) of history."""
    rows: list[VersionRow] = []
    while True:
        page = store.versions(AGENT, path, after=rows[-1].version if rows else 0)
        rows.extend(page)
        if not page:
            return rows


def _expected_changes(ack: dict[str, Any]) -> list[tuple[str, str | None]]:
    if ack["op"] == "put":
        return [(ack["path"], ack["sha"])]
    if ack["op"] == "batch":
        return [(p, s) for p, s in ack["changes"]]
    if ack["op"] == "delete":
        return [(ack["path"], None)]
    assert ack["op"] == "mv"
    return [(ack["src"], None), (ack["dst"], ack["sha"])]


def test_sigkill_loses_no_acknowledged_commit(tmp_path: Path) -> None:
    data = tmp_path / "data"
    rng = random.Random(20261129)
    acks: list[dict[str, Any]] = []
    acked_per_round: list[int] = []
    startup = 0.3  # seconds from spawn to an open store; learnt from the odd rounds
    for round_no in range(ROUNDS):
        started = time.monotonic()
        child = _Child(data, seed=round_no)
        if round_no % 2:
            # In the middle of committing: 20-300 ms after the store is open.
            if child.ready.wait(WAIT):
                startup = time.monotonic() - started
            time.sleep(rng.uniform(0.02, 0.3))
        else:
            # Around start-up: opening the store, creating the agent, catching up
            # with the commit the previous child left unindexed, the first commits.
            time.sleep(rng.uniform(0.6 * startup, startup + 0.1))
        got, err = child.kill()
        assert child.proc.returncode == -signal.SIGKILL, err.decode()
        acks.extend(got)
        acked_per_round.append(len(got))
        _check_final_files(data, _read_log(data))
    assert sum(acked_per_round) > 0, "no child ever got to commit; the kills came too early"

    entries = _read_log(data)
    assert sorted(entries) == list(range(1, len(entries) + 1)), "log revisions must be 1..N"

    # Acknowledged revisions only grow, each was acknowledged once, and beyond them
    # the log holds at most the one commit each killed child had in flight.
    revisions = [a["rev"] for a in acks]
    assert revisions == sorted(revisions)
    assert len(set(revisions)) == len(revisions)
    assert len(entries) - len(acks) <= ROUNDS

    # Every acknowledged commit is the log entry of its revision.
    for ack in acks:
        entry = entries.get(ack["rev"])
        assert entry is not None, f"acknowledged revision {ack['rev']} is not in the log"
        got_changes = [(c["path"], c["after"]) for c in entry["changes"]]
        assert got_changes == _expected_changes(ack), ack

    # The store (before any repair) has every acknowledged version in its history.
    store = Store(data)
    try:
        for ack in acks:
            entry = entries[ack["rev"]]
            for change in entry["changes"]:
                rows = _history(store, change["path"])
                [row] = [r for r in rows if r.version == change["version"]]
                assert (row.revision, row.sha256) == (ack["rev"], change["after"])
        # Catch the index up with what a killed writer left in the log, as any next
        # writer would, then the index, the reads and the working tree equal the log.
        store.sync(AGENT)
        head, touched = _head(entries)
        assert store.get_agent(AGENT).revision == len(entries)
        page, more = store.list_memories(AGENT, limit=1000)
        assert not more
        assert {row.path: row.sha256 for row in page} == head
        for path, sha in head.items():
            memory = store.read(AGENT, path)
            assert hashlib.sha256(memory.content).hexdigest() == sha == memory.sha256
    finally:
        store.close()

    # The head of each path is its last acknowledged write or a later unacknowledged
    # commit that the log recorded (the log is the truth).
    acked_revisions = set(revisions)
    last_ack: dict[str, int] = {}
    for ack in acks:
        for path, _sha in _expected_changes(ack):
            last_ack[path] = ack["rev"]
    for path, revision in last_ack.items():
        assert touched[path] >= revision
        later = [
            r
            for r in entries
            if r > revision and any(c["path"] == path for c in entries[r]["changes"])
        ]
        assert not acked_revisions.intersection(later), path

    repaired = _memfs(data, "fsck", "--repair")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    checked = _memfs(data, "--json", "fsck")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    report = json.loads(checked.stdout)
    assert report["ok"] is True
    assert report["damaged"] == [] and report["derived"] == [] and report["uncommitted"] == []
    assert report["commits"] == len(entries)

    # After repair the working tree is exactly the head (temp files are never entries).
    tree = WorkTree(layout.worktree_root(data, AGENT))
    on_disk = {path: hashlib.sha256(f.read_bytes()).hexdigest() for path, f in tree.scan()}
    assert on_disk == head


def test_create_agent_adopts_a_record_left_by_a_crash(tmp_path: Path) -> None:
    """A crash between the agent record and the index commit must not wedge the id."""
    data = tmp_path / "data"
    script = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from memfs.derived import index\n"
        "from memfs.core.store import Store\n"
        "def die(*a, **k):\n"
        "    os.kill(os.getpid(), 9)\n"
        "index.SqliteWrite.put_agent = die\n"  # dies right after the record was published
        "Store(Path(sys.argv[1])).create_agent('crash/agent')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(data)], capture_output=True, timeout=WAIT, check=False
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    assert (data / layout.agent_key(AGENT)).is_file()
    store = Store(data)
    try:
        with pytest.raises(NotFound):  # the index never heard of it
            store.get_agent(AGENT)
        with pytest.raises(Conflict):  # but the record exists: it is adopted
            store.create_agent(AGENT)
        assert store.get_agent(AGENT).revision == 0
        result = store.write(AGENT, "/memories/x.md", b"x\n", actor="t")
        assert result.revision == 1
        assert store.read(AGENT, "/memories/x.md").content == b"x\n"
    finally:
        store.close()
    checked = _memfs(data, "fsck")
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_a_torn_append_is_never_an_entry(tmp_path: Path) -> None:
    """A writer killed in the middle of appending its entry leaves a torn tail that no
    reader takes for an entry; the next writer cuts it and takes that revision."""
    data = tmp_path / "data"
    store = Store(data)
    try:
        store.create_agent(AGENT)
        store.write(AGENT, "/memories/a.md", b"one\n", actor="t")
    finally:
        store.close()
    script = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from memfs.core.store import Store\n"
        "real = os.pwrite\n"
        "def die_halfway(fd, data, offset):\n"
        "    if os.readlink(f'/proc/self/fd/{fd}').endswith('.seg'):\n"
        "        real(fd, data[: len(data) // 2], offset)\n"
        "        os.kill(os.getpid(), 9)\n"
        "    return real(fd, data, offset)\n"
        "os.pwrite = die_halfway\n"
        "Store(Path(sys.argv[1])).write('crash/agent', '/memories/a.md', b'two\\n', actor='t')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(data)], capture_output=True, timeout=WAIT, check=False
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    (segment,) = segment_files(data, AGENT)
    torn_size = segment.stat().st_size
    assert sorted(_read_log(data)) == [1]  # and a torn tail after it
    store = Store(data)
    try:
        assert store.read(AGENT, "/memories/a.md").content == b"one\n"
        result = store.write(AGENT, "/memories/a.md", b"three\n", actor="t")
        assert result.revision == 2
    finally:
        store.close()
    assert sorted(_read_log(data)) == [1, 2]
    # The torn bytes were cut before the append: the segment is exactly two frames,
    # then zeros (the torn frame's bytes zeroed, then overwritten in place).
    assert [f[1] for f in frames(segment)] == [1, 2]
    assert segment.stat().st_size == torn_size  # no size change: in the zero tail
    assert segment.read_bytes().rstrip(b"\0") == used(segment)
    checked = _memfs(data, "fsck")
    assert checked.returncode == 0, checked.stdout + checked.stderr
