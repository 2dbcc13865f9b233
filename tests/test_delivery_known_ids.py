"""A retried webhook id is answered from what the process knows of its record, exactly.

A process keeps the run id of each delivery record it has read, with the identity of
the record's file (``canonical/identity.py``), and answers a retry with one ``lstat``
and the run's row instead of reading and parsing the record again. It must never
answer with a run whose record is gone: a record collected or erased by another
process (a second worker on the same folder), and a new record made under the same
key after that, are seen by the very next delivery. And collection deletes only its
own run's record, also after a reindex brought back the key of a run collected before.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memfs.canonical.backend import LocalBackend
from memfs.core import maintenance
from memfs.core.runs import Run, Runs, delivery_key
from memfs.core.store import Store
from memfs.core.triggers import Triggers

AGENT = "users/alice/assistant"
TRIGGER = "gh"
SECRET = "whsec_dGhlLXNlY3JldC1vZi0zMi1ieXRlcy1sb25nISE="
HOUR_US = 3600 * 1_000_000
RETENTION_US = 72 * HOUR_US
OWNER = {"host": "test", "pid": 0}


class _CountingReads(LocalBackend):
    """Counts the reads of delivery records."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.record_reads = 0

    def get(self, key: str) -> bytes:
        if "/deliveries/" in key:
            self.record_reads += 1
        return super().get(key)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "data", backend=_CountingReads(tmp_path / "data"))
    opened.create_agent(AGENT)
    Triggers(opened.backend).put(AGENT, TRIGGER, {"prompt": "p", "secret": SECRET})
    yield opened
    opened.close()


def _deliver(store: Store, webhook_id: str) -> tuple[Run, bool]:
    return Runs(store).deliver(AGENT, TRIGGER, webhook_id, b"{}", "application/json", 3)


def _finish(store: Store, run: Run) -> Run:
    runs = Runs(store)
    assert runs.claim(run, OWNER) == run.attempt + 1
    ended = runs.append(
        AGENT, run.run_id, lambda _cur: {"type": "succeeded", "attempt": 1, "exitCode": 0}
    )
    assert ended is not None and ended.status == "succeeded"
    return ended


def _other_worker(data: Path, script: str) -> str:
    """Run ``script`` in another process on the same data folder; its last line."""
    code = textwrap.dedent(
        f"""
        from pathlib import Path
        from memfs.core.runs import Runs
        from memfs.core.store import Store
        from memfs.core.triggers import Triggers
        store = Store(Path({str(data)!r}))
        runs = Runs(store)
        AGENT, TRIGGER, SECRET = {AGENT!r}, {TRIGGER!r}, {SECRET!r}
        """
    ) + textwrap.dedent(script) + "\nstore.close()\n"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_a_retry_is_answered_without_reading_its_record_and_shows_the_run_now(
    store: Store,
) -> None:
    backend = store.backend
    assert isinstance(backend, _CountingReads)
    first, created = _deliver(store, "msg_retried")
    assert created
    reads = backend.record_reads
    for _ in range(5):
        again, created = _deliver(store, "msg_retried")
        assert not created and again.run_id == first.run_id and again.status == "queued"
    # One read (the first retry), then none: the record's file is only checked.
    assert backend.record_reads - reads == 1
    # The answer is the run as it is now, not as it was when its record was read.
    _finish(store, first)
    again, created = _deliver(store, "msg_retried")
    assert not created and again.status == "succeeded"
    assert backend.record_reads - reads == 1


@pytest.mark.parametrize("reindexed", [False, True])
def test_a_record_collected_and_made_again_by_another_worker_is_seen_at_once(
    store: Store, tmp_path: Path, reindexed: bool
) -> None:
    first, _ = _deliver(store, "msg_collected")
    known, created = _deliver(store, "msg_collected")  # now known to this process
    assert not created and known.run_id == first.run_id
    done = _finish(store, first)
    # The other worker collects the record (retention passed) and, as a later
    # delivery of the same id, makes a new record and run under the same key.
    new_run = _other_worker(
        tmp_path / "data",
        f"""
        assert runs.collect({done.created_at + RETENTION_US + 1}, {RETENTION_US}) == 1
        run, created = runs.deliver(AGENT, TRIGGER, "msg_collected", b"{{}}", "text/plain", 3)
        assert created
        print(run.run_id)
        """,
    )
    assert new_run != first.run_id
    if reindexed:  # the old run's row names the key again (from its event 1)
        maintenance.reindex(store)
    again, created = _deliver(store, "msg_collected")
    assert not created and again.run_id == new_run and again.status == "queued"


def test_a_record_collected_by_another_worker_makes_a_new_run_here(
    store: Store, tmp_path: Path
) -> None:
    first, _ = _deliver(store, "msg_gone")
    _deliver(store, "msg_gone")
    done = _finish(store, first)
    _other_worker(
        tmp_path / "data",
        f"print(runs.collect({done.created_at + RETENTION_US + 1}, {RETENTION_US}))",
    )
    again, created = _deliver(store, "msg_gone")
    assert created and again.run_id != first.run_id
    assert again.webhook_id == first.webhook_id and again.status == "queued"


def test_an_agent_erased_and_made_again_by_another_worker_gets_a_new_run(
    store: Store, tmp_path: Path
) -> None:
    first, _ = _deliver(store, "msg_erased")
    _deliver(store, "msg_erased")
    new_run = _other_worker(
        tmp_path / "data",
        """
        store.erase_agent(AGENT)
        store.create_agent(AGENT)
        Triggers(store.backend).put(AGENT, TRIGGER, {"prompt": "p", "secret": SECRET})
        run, created = runs.deliver(AGENT, TRIGGER, "msg_erased", b"{}", "text/plain", 3)
        assert created
        print(run.run_id)
        """,
    )
    again, created = _deliver(store, "msg_erased")
    assert not created and again.run_id == new_run != first.run_id


def test_an_agent_erased_here_forgets_its_ids(store: Store) -> None:
    first, _ = _deliver(store, "msg_here")
    _deliver(store, "msg_here")
    store.erase_agent(AGENT)
    store.create_agent(AGENT)
    Triggers(store.backend).put(AGENT, TRIGGER, {"prompt": "p", "secret": SECRET})
    again, created = _deliver(store, "msg_here")
    assert created and again.run_id != first.run_id


def test_collection_after_a_reindex_keeps_a_later_record_of_the_same_id(store: Store) -> None:
    old = _finish(store, _deliver(store, "msg_twice")[0])
    assert Runs(store).collect(old.created_at + RETENTION_US + 1, RETENTION_US) == 1
    time.sleep(0.002)
    new, created = _deliver(store, "msg_twice")  # a new record under the same key
    assert created
    # A rebuilt index knows the old run from its event 1, which names the key again.
    maintenance.reindex(store)
    runs = Runs(store)
    runs.collect(new.created_at + RETENTION_US * 10, RETENTION_US)
    key = delivery_key(AGENT, TRIGGER, "msg_twice")
    assert store.data_dir.joinpath(*key.split("/")).is_file()  # the queued run's record
    again, created = _deliver(store, "msg_twice")
    assert not created and again.run_id == new.run_id
    assert runs.delivery(runs.get(AGENT, new.run_id))["runId"] == new.run_id
