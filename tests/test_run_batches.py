"""Runs claimed and ended in batches: shared durable writes, each attempt still won once.

A poll claims its due runs together (``Runs.claim_many``): a batch's claims of one
agent are the same bytes, so one file hard-linked under each claim's name, and so are
their ``claimed`` events; an agent's batch is executed in order and its ends are
recorded together (``Runs.append_many``). Each name is still create-if-absent, so a
run claimed elsewhere first is left to its claimer, in this process or another.
"""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memfs.canonical import layout
from memfs.canonical.backend import LocalBackend
from memfs.config import Settings
from memfs.core import deliveries
from memfs.core.actions.memory import MemoryAction
from memfs.core.keys import KeyRing
from memfs.core.runner import Runner, owner_record
from memfs.core.runs import Run, Runs, claim_key
from memfs.core.store import Store
from memfs.core.triggers import Triggers
from memfs.domain.commits import now_us
from memfs.domain.webhook_verify import sign

AGENT = "users/alice/assistant"
TRIGGER = "gh"
SECRET = "whsec_" + base64.b64encode(b"the-batch-secret-of-32-bytes-ok!").decode()


def _deliver(store: Store, webhook_id: str) -> str:
    body = b'{"n": 1}'
    stamp = int(time.time())
    headers = {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(SECRET, webhook_id, stamp, body),
    }
    target = deliveries.target(store, Settings(), AGENT, TRIGGER)
    run, created = deliveries.accept(
        store, Settings(), target, body, headers, "application/json", now=time.time()
    )
    assert created
    return run.run_id


def _make(data: Path) -> Store:
    store = Store(data)
    store.create_agent(AGENT)
    Triggers(store.backend).put(AGENT, TRIGGER, {"prompt": "p", "secret": SECRET})
    return store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = _make(tmp_path / "data")
    yield opened
    opened.close()


def _runs_folder(store: Store) -> Path:
    assert isinstance(store.backend, LocalBackend)
    return store.backend.root / layout.agent_prefix(AGENT) / "runs"


def _inode(store: Store, run_id: str, suffix: str) -> int:
    return os.stat(_runs_folder(store) / f"{run_id}.{suffix}.json").st_ino


def test_a_polls_runs_share_their_claims_and_events_and_each_ends_with_its_memory(
    store: Store,
) -> None:
    ids = [_deliver(store, f"msg_{n}") for n in range(6)]
    runner = Runner(store, KeyRing(store.backend), base_url="http://test", concurrency=4)
    runner.last_delivery = time.monotonic() - 60  # no deliveries arriving: full concurrency

    async def one_poll() -> None:
        await runner.poll()
        await asyncio.gather(*set(runner.active.values()))

    asyncio.run(one_poll())
    runs = Runs(store)
    done = [r for r in ids if runs.get(AGENT, r).status == "succeeded"]
    assert len(done) == 4, [runs.get(AGENT, r).status for r in ids]
    # One claim file for the four (linked under each name), one for their events.
    assert len({_inode(store, r, "c0001") for r in done}) == 1
    assert len({_inode(store, r, "e000002") for r in done}) == 1
    # Executed in two batches of two (concurrency / WAVES), each ending together.
    assert len({_inode(store, r, "e000003") for r in done}) == 2
    for run_id in done:
        run = runs.get(AGENT, run_id)
        assert (run.attempt, run.events) == (1, 3)
        assert run.started_at is not None and run.finished_at is not None
    # Each delivery is its own memory, committed by its own run.
    assert store.count_memories(AGENT) == 4
    actors = {c.actor for c in store.log(AGENT, limit=50)}
    assert {f"run:{r}" for r in done} <= actors
    # The rest on the next poll, the same way.
    asyncio.run(one_poll())
    assert all(runs.get(AGENT, r).status == "succeeded" for r in ids)
    assert store.count_memories(AGENT) == 6


def test_a_run_claimed_elsewhere_first_is_left_out_of_a_batch(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = [_deliver(store, f"msg_{n}") for n in range(3)]
    runs = Runs(store)
    stale: list[Run] = [runs.get(AGENT, r) for r in ids]  # read before the other claim
    other = {**owner_record(), "pid": 1, "start": "other"}
    assert runs.claim(stale[1], other) == 1
    # The batch does not see the other claim before its link (a race): the link decides.
    exists = store.backend.exists
    taken = claim_key(AGENT, ids[1], 1)
    monkeypatch.setattr(store.backend, "exists", lambda key: key != taken and exists(key))
    mine = owner_record()
    assert runs.claim_many(stale, mine) == [1, None, 1]
    for run_id, owner in zip(ids, (mine, other, mine), strict=True):
        run = runs.get(AGENT, run_id)
        assert (run.status, run.attempt, run.events) == ("running", 1, 2)
        assert runs.owner(run) == {**owner, "attempt": 1}


_CHILD = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path
    from memfs.core.keys import KeyRing
    from memfs.core.runner import Runner
    from memfs.core.store import Store
    from memfs.domain.commits import now_us

    store = Store(Path(sys.argv[1]))
    runner = Runner(store, KeyRing(store.backend), base_url="http://test", concurrency=8)
    go = Path(sys.argv[2])
    while not go.exists():
        time.sleep(0.005)

    async def main() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            await runner.poll()
            if runner.active:
                await asyncio.gather(*set(runner.active.values()))
            elif not runner.runs.due(now_us(), 1):
                return  # every run has ended (a run the other runs is still due)
            else:
                await asyncio.sleep(0.01)
        raise SystemExit("runs still due after 120 s")

    asyncio.run(main())
    store.close()
    """
)


def test_two_processes_racing_batches_over_the_same_runs_claim_each_attempt_once(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    store = _make(data)
    count = 24
    ids = [_deliver(store, f"msg_{n}") for n in range(count)]
    store.close()
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(data), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for _ in range(2)
    ]
    go.touch()
    errors = [proc.communicate(timeout=180)[1] for proc in procs]  # every pipe closed
    for proc, err in zip(procs, errors, strict=True):
        assert proc.returncode == 0, err.decode()
    store = Store(data)
    try:
        runs = Runs(store)
        folder = _runs_folder(store)
        for run_id in ids:
            run = runs.get(AGENT, run_id)
            assert (run.status, run.attempt) == ("succeeded", 1), run
            # One claim of one attempt: the other process never ran it too.
            assert sorted(p.name for p in folder.glob(f"{run_id}.c*.json")) == [
                f"{run_id}.c0001.json"
            ]
            assert sorted(p.name for p in folder.glob(f"{run_id}.e*.json")) == [
                f"{run_id}.e000002.json",
                f"{run_id}.e000003.json",
            ]
        assert store.count_memories(AGENT) == count
        assert not runs.due(now_us(), 10)
    finally:
        store.close()


def test_a_cancelled_batch_begins_no_further_attempt(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shutting down (or losing the lease) mid-batch: the attempt under way ends, the
    batch's next one never begins, so another server adopting it can't run it twice."""
    ids = [_deliver(store, f"msg_{n}") for n in range(2)]
    runner = Runner(store, KeyRing(store.backend), base_url="http://test", concurrency=4)
    runner.last_delivery = time.monotonic() - 60
    entered, release = threading.Event(), threading.Event()
    performed: list[str] = []
    real = MemoryAction.perform_blocking

    def slow(self: MemoryAction, run: Run, *args: object) -> object:
        performed.append(run.run_id)
        entered.set()
        assert release.wait(30)
        return real(self, run, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(MemoryAction, "perform_blocking", slow)

    async def cancel_mid_batch() -> None:
        await runner.poll()
        task = next(iter(runner.active.values()))
        assert len(set(runner.active.values())) == 1  # the two runs: one batch
        await asyncio.to_thread(entered.wait, 30)
        task.cancel()
        await asyncio.sleep(0.05)
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel_mid_batch())
    runs = Runs(store)
    deadline = time.monotonic() + 30
    while runs.get(AGENT, ids[0]).status != "succeeded" and time.monotonic() < deadline:
        time.sleep(0.02)
    assert performed == [ids[0]]
    assert runs.get(AGENT, ids[0]).status == "succeeded"
    second = runs.get(AGENT, ids[1])
    assert (second.status, second.attempt) == ("running", 1)  # claimed, never begun
    assert store.count_memories(AGENT) == 1
