"""The cheap paths of a delivery stay exact, and the runner yields while they arrive.

- A trigger is read once, then checked against its newest record before each delivery
  (one read, one stat: no folder listing). Any change is seen by the very next
  delivery: a rotated secret verifies at once (and the old one through its overlap), a
  deleted trigger answers 404, and a trigger erased with its agent and made again under
  the same ids never accepts the old secret.
- The leader that makes a batch of new delivery records durable indexes their runs in
  the same flush: no delivery waits in the registration queue, and each run is
  readable as soon as its 202 is answered.
- While new deliveries arrive, the runner starts one run per poll (not up to its
  concurrency), and still one, so runs are delayed, never starved.
"""

from __future__ import annotations

import asyncio
import base64
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memfs.canonical.backend import LocalBackend
from memfs.config import Settings
from memfs.core import deliveries
from memfs.core.keys import KeyRing
from memfs.core.runner import Runner
from memfs.core.runs import Runs
from memfs.core.store import Store
from memfs.core.triggers import Triggers
from memfs.domain.webhook_verify import sign
from memfs.errors import NotFound, Unauthorized

AGENT = "users/alice/assistant"
TRIGGER = "gh"
OLD = "whsec_" + base64.b64encode(b"the-old-secret-of-32-bytes-long!").decode()
NEW = "whsec_" + base64.b64encode(b"the-new-secret-of-32-bytes-long!").decode()


class _Counting(LocalBackend):
    """Counts the listings of trigger folders (how a trigger is read afresh)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.trigger_listings = 0

    def list(self, prefix: str, start_after: str = "") -> Iterator[str]:
        if "/triggers/" in prefix:
            self.trigger_listings += 1
        return super().list(prefix, start_after)


def _deliver(store: Store, secret: str, webhook_id: str) -> tuple[str, bool]:
    body = b'{"n": 1}'
    stamp = int(time.time())
    headers = {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(secret, webhook_id, stamp, body),
    }
    target = deliveries.target(store, Settings(), AGENT, TRIGGER)
    run, created = deliveries.accept(
        store, Settings(), target, body, headers, "application/json", now=time.time()
    )
    return run.run_id, created


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    backend = _Counting(tmp_path / "data")
    opened = Store(tmp_path / "data", backend=backend)
    opened.create_agent(AGENT)
    Triggers(opened.backend).put(AGENT, TRIGGER, {"prompt": "p", "secret": OLD})
    yield opened
    opened.close()


def test_a_known_trigger_is_checked_not_read_again(store: Store) -> None:
    backend = store.backend
    assert isinstance(backend, _Counting)
    _deliver(store, OLD, "msg_1")
    listed = backend.trigger_listings
    for n in range(5):
        _deliver(store, OLD, f"msg_again_{n}")
        _deliver(store, OLD, "msg_1")  # a retry, too
    assert backend.trigger_listings == listed


def test_every_change_of_a_trigger_is_seen_by_the_next_delivery(store: Store) -> None:
    _deliver(store, OLD, "msg_1")
    triggers = Triggers(store.backend)
    # Rotated: the new secret verifies at once, the old one through its overlap.
    rotated = triggers.rotate(AGENT, TRIGGER)
    fresh = rotated.secrets[0].value
    assert _deliver(store, fresh, "msg_2")[1] is True
    assert _deliver(store, OLD, "msg_3")[1] is True
    # Replaced with a secret of its own: the rotated ones no longer verify.
    triggers.put(AGENT, TRIGGER, {"prompt": "p", "secret": NEW})
    with pytest.raises(Unauthorized):
        _deliver(store, fresh, "msg_4")
    assert _deliver(store, NEW, "msg_5")[1] is True
    # Deleted: the next delivery is a 404.
    triggers.delete(AGENT, TRIGGER)
    with pytest.raises(NotFound):
        _deliver(store, NEW, "msg_6")


def test_a_trigger_made_again_after_its_agent_was_erased_refuses_the_old_secret(
    store: Store,
) -> None:
    assert _deliver(store, OLD, "msg_1")[1] is True
    store.erase_agent(AGENT)
    with pytest.raises(NotFound):
        _deliver(store, OLD, "msg_2")
    store.create_agent(AGENT)
    # The same trigger id, record number and prompt: only the secret differs.
    Triggers(store.backend).put(AGENT, TRIGGER, {"prompt": "p", "secret": NEW})
    with pytest.raises(Unauthorized):
        _deliver(store, OLD, "msg_3")
    assert _deliver(store, NEW, "msg_3")[1] is True


def test_new_deliveries_are_indexed_by_the_flush_that_made_them_durable(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    queued: list[object] = []
    real_submit = store.registrations.submit

    def submit(item: object, flush: object) -> None:
        queued.append(item)
        real_submit(item, flush)  # type: ignore[arg-type]

    monkeypatch.setattr(store.registrations, "submit", submit)
    answers: dict[str, str] = {}
    errors: list[BaseException] = []

    def one(n: int) -> None:
        try:
            run_id, created = _deliver(store, OLD, f"msg_{n}")
            assert created
            # Readable as soon as it is answered: indexed before the 202.
            assert Runs(store).get(AGENT, run_id).webhook_id == f"msg_{n}"
            answers[f"msg_{n}"] = run_id
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    assert len(set(answers.values())) == 12
    assert queued == []  # no delivery went through the registration queue
    # A retry of each is answered with its run, and starts nothing.
    for webhook_id, run_id in answers.items():
        assert _deliver(store, OLD, webhook_id) == (run_id, False)


def test_the_runner_starts_one_run_per_poll_while_deliveries_arrive(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(10):
        _deliver(store, OLD, f"msg_{n}")
    runner = Runner(store, KeyRing(store.backend), base_url="http://test", concurrency=4)

    async def held(pairs: object) -> None:
        await asyncio.Event().wait()  # an attempt that runs until cancelled

    monkeypatch.setattr(runner, "_execute", held)

    async def started_by_one_poll() -> int:
        await runner.poll()
        count = len(runner.active)
        for task in runner.active.values():
            task.cancel()  # only the starts are counted
        await asyncio.gather(*runner.active.values(), return_exceptions=True)
        runner.active.clear()
        return count

    runner.delivered()  # deliveries are arriving
    assert runner.ingesting()
    assert asyncio.run(started_by_one_poll()) == 1
    runner.delivered()
    assert asyncio.run(started_by_one_poll()) == 1  # still one: delayed, not starved
    runner.last_delivery = time.monotonic() - 60  # a quiet spell: full concurrency
    assert not runner.ingesting()
    assert asyncio.run(started_by_one_poll()) == 4
