"""Reindex with a long log's entries read and decoded by a forked worker process while
the parent writes the rows (``derived.index.bulk_worker``): the same rows, the same
damage reports and the same all-or-nothing transaction as decoding in one process; a
worker that dies fails the reindex and changes nothing; a reindex killed with SIGKILL
midway leaves the old index serving and a re-run completes.

The worker is used for logs of ``MIN_ENTRIES`` entries and more; these tests lower it
to 0 (and check the worker really ran), so short logs take the worker's path."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memfs.canonical import layout
from memfs.core import maintenance
from memfs.core.store import Delete, Put, Store
from memfs.derived.index import bulk_worker
from memfs.errors import Damaged
from segment_files import as_file_entry
from test_maintenance import BIG, populate, remove_index, search_rows, snapshot, table_rows

ACTOR = "test"
TABLES = ("commits", "versions", "memories", "memory_meta", "blobs", "links", "agents")
WAIT = 120.0  # seconds: the machine may be loaded


@pytest.fixture
def aside(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Every log of this test decoded by the worker; yields the number of logs it
    loaded, and fails a test in which it loaded none."""
    if not bulk_worker.can_fork():
        pytest.fail(
            "the reindex worker needs fork() and a process with one thread; this test"
            f" runs beside {threading.active_count() - 1} other thread(s)"
        )
    monkeypatch.setattr(bulk_worker, "MIN_ENTRIES", 0)
    loads: list[int] = []
    real = bulk_worker._load_aside

    def counted(*args: Any) -> int:
        loads.append(1)
        return real(*args)

    monkeypatch.setattr(bulk_worker, "_load_aside", counted)
    yield loads
    assert loads, "the worker process was never used"


def history(store: Store, agent: str) -> None:
    """``populate``'s history and a commit with more changes than the log's head."""
    populate(store, agent)
    many = [Put(f"/memories/many/n{i:02d}-\u00e9.md", f"n{i} [[a]]".encode()) for i in range(25)]
    store.apply(agent, many, actor=ACTOR, message="twenty-five at once")
    store.apply(agent, [Delete(p.path) for p in many[:21]], actor=ACTOR, message="and gone")


def test_a_log_decoded_aside_gives_the_rows_the_live_commits_wrote(
    tmp_path: Path, aside: list[int]
) -> None:
    data = tmp_path / "data"
    store = Store(data)
    agent = store.create_agent("users/alice/assistant").agent_id
    history(store, agent)
    before = {t: table_rows(data, t) for t in TABLES}
    answers, texts = snapshot(store), search_rows(data)
    store.close()

    remove_index(data)
    reopened = Store(data)
    try:
        rebuilt = maintenance.reindex(reopened)
        assert (rebuilt.agents, rebuilt.commits, rebuilt.damaged) == (3, 13, [])
        assert len(aside) == 3  # every agent's log, the empty one's too
        assert {t: table_rows(data, t) for t in TABLES} == before
        assert search_rows(data) == texts
        assert snapshot(reopened) == answers
        assert maintenance.fsck(reopened).ok
        # And in place, over the rows it made: nothing changes.
        maintenance.reindex(reopened)
        assert {t: table_rows(data, t) for t in TABLES} == before
    finally:
        reopened.close()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda entry: entry[: len(entry) // 2], "is unreadable"),  # torn JSON
        (lambda entry: entry.replace(b'"revision":3', b'"revision":4'), "names revision 4"),
    ],
)
def test_a_damaged_entry_found_aside_refuses_that_agent_and_keeps_its_rows(
    store: Store, agent: str, aside: list[int], damage: Callable[[bytes], bytes], message: str
) -> None:
    other = store.create_agent("users/bob/assistant").agent_id
    store.write(other, "/memories/b.md", b"b", actor=ACTOR)
    for i in range(6):
        store.write(agent, f"/memories/m{i}.md", f"m{i}".encode(), actor=ACTOR)
    before = snapshot(store)
    as_file_entry(store.data_dir, agent, 3, damage)
    result = maintenance.reindex(store)
    # The worker's error is the parent's: that agent refused with the entry named, its
    # rows kept (rolled back to before it was cleared), the other agent rebuilt.
    assert [(a, f) for a, f, _why in result.damaged] == [(agent, layout.log_key(agent, 3))]
    assert message in result.damaged[0][2]
    with pytest.raises(Damaged, match="memfs fsck"):
        store.read(agent, "/memories/m0.md")
    assert store.read(other, "/memories/b.md").content == b"b"
    maintenance.fsck(store, repair=True)  # the index's intact copy restores the entry
    assert maintenance.fsck(store).ok
    assert snapshot(store) == before


def test_a_missing_content_found_aside_refuses_that_agent(
    store: Store, agent: str, aside: list[int]
) -> None:
    store.write(agent, "/memories/big.md", BIG, actor=ACTOR)  # too large to be inline
    store.write(agent, "/memories/small.md", b"s", actor=ACTOR)
    key = layout.blob_key(agent, maintenance.hashlib.sha256(BIG).hexdigest())
    (store.data_dir / key).unlink()
    result = maintenance.reindex(store)
    assert [(a, f) for a, f, _why in result.damaged] == [(agent, key)]
    assert "content is missing" in result.damaged[0][2]


def test_a_worker_that_dies_fails_the_reindex_and_changes_nothing(
    store: Store, agent: str, aside: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(5):
        store.write(agent, f"/memories/m{i}.md", f"m{i}".encode(), actor=ACTOR)
    before = snapshot(store)
    real = maintenance.log_entries

    def dies(store: Store, agent_id: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
        entries = real(store, agent_id)
        yield next(entries)
        os._exit(3)  # in the worker: as if killed (out of memory) midway

    monkeypatch.setattr(maintenance, "log_entries", dies)
    with pytest.raises(RuntimeError, match="stopped"):
        maintenance.reindex(store)
    assert snapshot(store) == before  # the whole transaction rolled back
    monkeypatch.setattr(maintenance, "log_entries", real)
    assert maintenance.reindex(store).commits == 5
    assert snapshot(store) == before


def test_short_logs_and_processes_with_threads_decode_in_process(
    store: Store, agent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No fork for a log shorter than MIN_ENTRIES, nor beside another thread (a lock
    it held would stay held in the child): a serving process's rebuild runs here."""
    store.write(agent, "/memories/a.md", b"a", actor=ACTOR)
    forks: list[int] = []
    monkeypatch.setattr(bulk_worker, "_load_aside", lambda *a: forks.append(1) or 0)
    assert maintenance.reindex(store).commits == 1  # one entry: below MIN_ENTRIES
    monkeypatch.setattr(bulk_worker, "MIN_ENTRIES", 0)
    stop = threading.Event()
    beside = threading.Thread(target=stop.wait)
    beside.start()
    try:
        assert maintenance.reindex(store).commits == 1
    finally:
        stop.set()
        beside.join()
    assert forks == []


# The reindex of the test below, in its own process: the worker decodes, the parent
# writes the first batch of commits rows, says so and waits to be killed.
_KILLED_MIDWAY = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from memfs.core import maintenance
    from memfs.core.store import Store
    from memfs.derived.index import bulk, bulk_worker

    bulk_worker.MIN_ENTRIES = 0
    real = bulk_worker.write_commits

    def write_then_wait(conn, rows):
        real(conn, rows)
        Path(sys.argv[2]).write_text("written")
        time.sleep(600)

    bulk_worker.write_commits = write_then_wait
    maintenance.reindex(Store(Path(sys.argv[1])))
    """
)


def test_a_reindex_killed_midway_leaves_the_old_index_and_a_rerun_completes(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    store = Store(data)
    agent = store.create_agent("users/alice/assistant").agent_id
    history(store, agent)
    answers = snapshot(store)
    before = {t: table_rows(data, t) for t in TABLES}
    store.close()
    marker, errors = tmp_path / "written", tmp_path / "stderr"
    with errors.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", _KILLED_MIDWAY, str(data), str(marker)], stderr=err
        )
    try:
        deadline = time.monotonic() + WAIT
        while not marker.exists():
            assert proc.poll() is None, errors.read_text()
            assert time.monotonic() < deadline, "the reindex never wrote its first rows"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        proc.wait(WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(WAIT)
    assert proc.returncode == -signal.SIGKILL

    # The old index answers as before (its rows were cleared and partly rewritten in a
    # transaction that never committed), with nothing to repair.
    reopened = Store(data)
    try:
        assert snapshot(reopened) == answers
        assert {t: table_rows(data, t) for t in TABLES} == before
        assert maintenance.fsck(reopened).ok
        rebuilt = maintenance.reindex(reopened)
        assert (rebuilt.agents, rebuilt.damaged) == (3, [])
        assert {t: table_rows(data, t) for t in TABLES} == before
    finally:
        reopened.close()
