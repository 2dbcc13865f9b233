"""Collecting delivery records: ``Runs.collect(now, retention_us)``.

A delivery record (``agents/<dir>/.memfs/deliveries/<trigger>/<sha256(id)>.json``) is
the dedupe record of a webhook id: while it exists, every redelivery of that id
answers with the same run. The contract (design §3, "Triggers, deliveries, runs")
promises only that these records are kept *at least* ``deliveryRetentionHours``
(default 72, ``MEMFS_DELIVERY_RETENTION_HOURS``); the server's Runner calls
``collect`` now and then so the folder does not grow forever. Here:

- records of finished runs (succeeded, failed) older than the retention go, records
  of younger finished runs and of unfinished runs (queued, running, delayed: they
  still need the body) stay, whatever their age;
- the run itself (its events) is never collected: ``Runs.get`` still answers, also
  after the index is rebuilt from the canonical objects;
- a redelivery of a collected id starts a NEW run;
- a retention below 72 hours is refused when the settings are loaded.

Time is faked by passing ``now`` (microseconds since the epoch, as ``created_at``)
to ``collect``; the store is a real one on files in ``tmp_path``, no server.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from memfs import config
from memfs.core import maintenance
from memfs.core.runs import TERMINAL, Run, Runs, delivery_key
from memfs.core.store import Store
from memfs.errors import Conflict, InvalidRequest, NotFound

HOUR_US = 3600 * 1_000_000
RETENTION_US = 72 * HOUR_US
TRIGGER = "gh"
OWNER = {"host": "test", "pid": 0}


@pytest.fixture
def runs(store: Store, agent: str) -> Runs:
    return Runs(store)


def deliver(runs: Runs, agent: str, webhook_id: str, body: bytes = b"{}") -> Run:
    run, created = runs.deliver(agent, TRIGGER, webhook_id, body, "application/json", 3)
    assert created, webhook_id
    # Distinct creation times, so "older than" is strict between consecutive runs.
    time.sleep(0.002)
    return run


def start(runs: Runs, run: Run) -> Run:
    assert runs.claim(run, OWNER) == run.attempt + 1
    return runs.get(run.agent_id, run.run_id)


def end(runs: Runs, run: Run, *, ok: bool, retry_at: int | None = None) -> Run:
    """Claim the next attempt of ``run`` and end it (succeeded / failed / delayed)."""
    run = start(runs, run)
    event = (
        {"type": "succeeded", "attempt": run.attempt, "exitCode": 0}
        if ok
        else {
            "type": "failed",
            "attempt": run.attempt,
            "exitCode": 1,
            "error": "exit code 1",
            "nextRetryAt": retry_at,
        }
    )
    ended = runs.append(run.agent_id, run.run_id, lambda _cur: event)
    assert ended is not None
    return ended


def record_file(store: Store, run: Run) -> Path:
    key = delivery_key(run.agent_id, run.trigger_id, run.webhook_id)
    return store.data_dir.joinpath(*key.split("/"))


def test_old_finished_records_go_young_and_unfinished_ones_stay(
    store: Store, agent: str, runs: Runs
) -> None:
    old_ok = end(runs, deliver(runs, agent, "msg_old_ok"), ok=True)
    old_failed = end(runs, deliver(runs, agent, "msg_old_failed"), ok=False)
    young = end(runs, deliver(runs, agent, "msg_young"), ok=True)
    assert (old_ok.status, old_failed.status, young.status) == ("succeeded", "failed", "succeeded")
    assert old_ok.created_at < old_failed.created_at < young.created_at
    files = {r.run_id: record_file(store, r) for r in (old_ok, old_failed, young)}
    assert all(f.is_file() for f in files.values())

    # ``now`` puts ``young`` exactly at the retention: "kept at least" keeps it.
    now = young.created_at + RETENTION_US
    assert runs.collect(now, RETENTION_US) == 2
    assert not files[old_ok.run_id].exists()
    assert not files[old_failed.run_id].exists()
    assert files[young.run_id].is_file()
    # Collected once: the next pass finds nothing more to do.
    assert runs.collect(now, RETENTION_US) == 0

    # One microsecond later ``young`` is older than the retention, too.
    assert runs.collect(now + 1, RETENTION_US) == 1
    assert not files[young.run_id].exists()


def test_unfinished_runs_keep_their_record_at_any_age(store: Store, agent: str, runs: Runs) -> None:
    queued = deliver(runs, agent, "msg_queued")
    running = start(runs, deliver(runs, agent, "msg_running"))
    delayed = end(runs, deliver(runs, agent, "msg_delayed"), ok=False, retry_at=1)
    assert (queued.status, running.status, delayed.status) == ("queued", "running", "delayed")

    far_future = delayed.created_at + 1000 * RETENTION_US
    assert runs.collect(far_future, RETENTION_US) == 0
    for run in (queued, running, delayed):
        assert record_file(store, run).is_file(), run.status
        # The runner reads the body from the record to execute the next attempt.
        assert runs.body(runs.delivery(runs.get(agent, run.run_id))) == b"{}"

    # Once the delayed run has ended for good, it is collectable like any other.
    def give_up(cur: Run | None) -> dict[str, object]:
        assert cur is not None
        return {"type": "failed", "attempt": cur.attempt, "error": "gave up"}

    runs.append(agent, delayed.run_id, lambda cur: {"type": "claimed", "attempt": 2})
    ended = runs.append(agent, delayed.run_id, give_up)
    assert ended is not None and ended.status == "failed"
    assert runs.collect(far_future, RETENTION_US) == 1
    assert not record_file(store, delayed).exists()
    assert record_file(store, queued).is_file() and record_file(store, running).is_file()


def test_collected_run_stays_readable(store: Store, agent: str, runs: Runs) -> None:
    done = end(runs, deliver(runs, agent, "msg_done", b'{"n": 1}'), ok=False)
    before = runs.get(agent, done.run_id)
    assert runs.collect(done.created_at + RETENTION_US + 1, RETENTION_US) == 1

    after = runs.get(agent, done.run_id)
    assert after.to_json() == before.to_json()
    assert after.status in TERMINAL and after.delivery_key is None
    listed = runs.list(agent, trigger_id=TRIGGER, status="failed", after=None, limit=10)
    assert [r.run_id for r in listed] == [done.run_id]
    # Only the body is gone, and asking for it says so; a retry would be sure to fail.
    with pytest.raises(NotFound, match="collected"):
        runs.delivery(after)
    with pytest.raises(Conflict, match="collected"):
        runs.retry(agent, done.run_id)

    # The run's events are canonical: a rebuilt index still has the run, and the
    # collected record does not come back.
    maintenance.reindex(store)
    rebuilt = Runs(store).get(agent, done.run_id)
    assert rebuilt.to_json() == before.to_json()
    assert not record_file(store, done).exists()
    with pytest.raises(NotFound, match="collected"):
        runs.delivery(rebuilt)
    with pytest.raises(Conflict, match="collected"):
        Runs(store).retry(agent, done.run_id)


def test_redelivery_of_a_collected_id_starts_a_new_run(
    store: Store, agent: str, runs: Runs
) -> None:
    first = end(runs, deliver(runs, agent, "msg_again"), ok=True)

    # Within the retention the record answers every redelivery with the same run.
    same, created = runs.deliver(agent, TRIGGER, "msg_again", b"{}", "application/json", 3)
    assert not created and same.run_id == first.run_id and same.status == "succeeded"
    assert runs.collect(first.created_at + RETENTION_US, RETENTION_US) == 0

    assert runs.collect(first.created_at + RETENTION_US + 1, RETENTION_US) == 1
    # Why a new run and not the old one: dedupe is the delivery record, and the
    # contract promises to keep it *at least* deliveryRetentionHours, not forever.
    # Once collected, memfs no longer knows the id, so the delivery is new: it gets
    # a new record and a new run. A genuine sender retry cannot arrive that late
    # (the webhook-timestamp must be within webhookToleranceSeconds, 300 s by
    # default, and senders give up within hours), so only a deliberately re-sent,
    # freshly signed message runs twice. The old run stays readable beside it.
    again, created = runs.deliver(agent, TRIGGER, "msg_again", b"{}", "application/json", 3)
    assert created
    assert again.run_id != first.run_id and again.status == "queued" and again.attempt == 0
    assert again.webhook_id == first.webhook_id
    assert record_file(store, again).is_file()
    assert runs.get(agent, first.run_id).status == "succeeded"
    # ...and from then on the new record deduplicates as before.
    third, created = runs.deliver(agent, TRIGGER, "msg_again", b"{}", "application/json", 3)
    assert not created and third.run_id == again.run_id
    ids = {r.run_id for r in runs.list(agent, trigger_id=None, status=None, after=None, limit=10)}
    assert ids == {first.run_id, again.run_id}


def test_retention_below_72_hours_is_refused() -> None:
    assert config.load({}, {}).delivery_retention_hours == 72
    assert config.load({"MEMFS_DELIVERY_RETENTION_HOURS": "72"}, {}).delivery_retention_hours == 72
    assert config.load({"MEMFS_DELIVERY_RETENTION_HOURS": "96"}, {}).delivery_retention_hours == 96
    for value in ("71", "0", "1", "-72", "72.5", "", "3d"):
        with pytest.raises(InvalidRequest, match="MEMFS_DELIVERY_RETENTION_HOURS"):
            config.load({"MEMFS_DELIVERY_RETENTION_HOURS": value}, {})
    # The matching ``memfs serve --delivery-retention-hours`` flag, too.
    with pytest.raises(InvalidRequest, match="--delivery-retention-hours"):
        config.load({}, {"delivery_retention_hours": "24"})


# ---- the record is the run's first event ------------------------------------------------


def test_a_new_delivery_is_one_durable_file_and_reindex_rebuilds_its_run(
    store: Store, agent: str, runs: Runs
) -> None:
    queued = deliver(runs, agent, "msg_only_record")
    ended = end(runs, deliver(runs, agent, "msg_ended"), ok=True)
    # A queued run is its delivery record and nothing else: no separate event file.
    runs_folder = record_file(store, queued).parents[2] / "runs"
    assert not list(runs_folder.glob(f"{queued.run_id}.*"))
    assert not (runs_folder / f"{ended.run_id}.e000001.json").exists()

    before = {r.run_id: r.to_json() for r in (queued, runs.get(agent, ended.run_id))}
    maintenance.reindex(store)
    fresh = Runs(store)
    assert {rid: fresh.get(agent, rid).to_json() for rid in before} == before
    # ...and the rebuilt index still deduplicates: a redelivery answers the same run.
    again, created = fresh.deliver(agent, TRIGGER, "msg_only_record", b"{}", "text/plain", 3)
    assert not created and again.run_id == queued.run_id


def test_collection_interrupted_after_publishing_event_1_loses_nothing(
    store: Store, agent: str, runs: Runs, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = end(runs, deliver(runs, agent, "msg_interrupted"), ok=True)
    before = runs.get(agent, done.run_id).to_json()

    # A crash (kill -9) between publishing event 1 and deleting the record: the
    # delete never happens. Simulated by a delete that raises.
    def crash(key: str) -> None:
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(store.backend, "delete", crash)
    with pytest.raises(KeyboardInterrupt):
        runs.collect(done.created_at + RETENTION_US + 1, RETENTION_US)
    monkeypatch.undo()
    assert record_file(store, done).is_file()  # still there: still deduplicates

    maintenance.reindex(store)  # record and event 1 both exist: they read alike
    fresh = Runs(store)
    assert fresh.get(agent, done.run_id).to_json() == before
    same, created = fresh.deliver(agent, TRIGGER, "msg_interrupted", b"{}", "text/plain", 3)
    assert not created and same.run_id == done.run_id

    # The next pass completes the collection; the run survives another rebuild.
    assert fresh.collect(done.created_at + RETENTION_US + 1, RETENTION_US) == 1
    assert not record_file(store, done).exists()
    maintenance.reindex(store)
    assert Runs(store).get(agent, done.run_id).to_json() == before


def test_concurrent_deliveries_in_one_process_each_start_exactly_one_run(
    store: Store, agent: str, runs: Runs
) -> None:
    """Threads of one process share index transactions (group commit); every id must
    still get one run, every retry the same one, and every run must be indexed."""
    ids = [f"msg_many_{n}" for n in range(12)]
    gate = threading.Barrier(48, timeout=30)
    answers: list[tuple[str, str, bool]] = []
    lock = threading.Lock()

    def one(webhook_id: str) -> None:
        gate.wait()
        run, created = Runs(store).deliver(
            agent, TRIGGER, webhook_id, webhook_id.encode(), "text/plain", 3
        )
        with lock:
            answers.append((webhook_id, run.run_id, created))

    threads = [threading.Thread(target=one, args=(ids[n % 12],)) for n in range(48)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(answers) == 48
    for webhook_id in ids:
        mine = [(run_id, created) for wid, run_id, created in answers if wid == webhook_id]
        assert len({run_id for run_id, _ in mine}) == 1, mine
        assert sum(created for _, created in mine) == 1, mine
    listed = runs.list(agent, trigger_id=TRIGGER, status="queued", after=None, limit=100)
    assert sorted(r.webhook_id for r in listed) == sorted(ids)
    for run in listed:
        assert runs.body(runs.delivery(run)) == run.webhook_id.encode()


def test_racing_appends_each_land_once_in_order(store: Store, agent: str, runs: Runs) -> None:
    run = start(runs, deliver(runs, agent, "msg_appends"))
    gate = threading.Barrier(16, timeout=30)

    def one(n: int) -> None:
        gate.wait()
        Runs(store).append(
            agent, run.run_id, lambda cur: {"type": "output", "attempt": 1, "output": str(n)}
        )

    threads = [threading.Thread(target=one, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    after = runs.get(agent, run.run_id)
    assert after.events == run.events + 16 and after.status == "running"
    maintenance.reindex(store)  # the same 16 events, once each, from the files
    rebuilt = Runs(store).get(agent, run.run_id)
    assert rebuilt.events == after.events and rebuilt.output == after.output


def test_due_runs_are_the_oldest_with_work_and_delayed_ones_only_when_due(
    tmp_path: Path,
) -> None:
    """What the executor picks up: queued and running runs (an owner may have died) and
    delayed runs whose retry time has come, oldest first, at most ``limit``."""
    store = Store(tmp_path / "data")
    store.create_agent("a")
    now = 1_000_000_000
    made = [  # (run id, status, created_at, next_retry_at)
        ("q-late", "queued", 900, None),
        ("d-due", "delayed", 100, now - 1),
        ("r-mid", "running", 500, None),
        ("d-later", "delayed", 50, now + 1),  # oldest of all, but not due yet
        ("q-early", "queued", 200, None),
        ("s-done", "succeeded", 10, None),
        ("f-done", "failed", 20, None),
        ("d-now", "delayed", 700, now),
    ]
    with store.index.write() as conn:
        for run_id, status, created_at, next_retry_at in made:
            conn.execute(
                "INSERT INTO runs VALUES(?,?,?,?,?,1,5,?,?,NULL,NULL,NULL,NULL,NULL,2,NULL)",
                ("a", run_id, "t", run_id, status, next_retry_at, created_at),
            )
    runs = Runs(store)
    assert [r.run_id for r in runs.due(now, 10)] == ["d-due", "q-early", "r-mid", "d-now", "q-late"]
    assert [r.run_id for r in runs.due(now, 2)] == ["d-due", "q-early"]
    store.close()
