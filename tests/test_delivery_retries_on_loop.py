"""A retried webhook id is answered on the event loop, and only with ``accept``'s answer.

``deliveries.retry_on_loop`` answers a retry without the trip to the delivery pool
when everything it needs is local and kept: the signature (checked first, with the
kept target's live secrets), an id this process answered before (``Runs.known_now``:
its record the same file, no event after the run's state kept), the target standing,
and the agent's row (NotFound, Damaged raised as ``accept`` raises them). Anything
else is None, and ``accept`` answers in its own order, so every refusal stays what it
was: a bad signature 401, a deleted trigger 404, a damaged agent 503.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memfs.canonical.backend import MemoryBackend
from memfs.config import Settings
from memfs.core import deliveries
from memfs.core.runs import Run, Runs
from memfs.core.store import Store
from memfs.core.triggers import Triggers
from memfs.domain.webhook_verify import sign
from memfs.errors import Damaged, NotFound, Unauthorized

AGENT = "users/alice/assistant"
TRIGGER = "gh"
SECRET = "whsec_" + base64.b64encode(b"the-secret-of-the-retry-tests-32").decode()
OTHER = "whsec_" + base64.b64encode(b"another-secret-of-32-bytes-long!").decode()
BODY = b'{"action": "opened"}'
OWNER = {"host": "test", "pid": 0}


def _headers(
    webhook_id: str, body: bytes = BODY, *, secret: str = SECRET, skew: int = 0
) -> dict[str, str]:
    stamp = int(time.time()) + skew
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(secret, webhook_id, stamp, body),
    }


def _accept(store: Store, headers: dict[str, str], body: bytes = BODY) -> tuple[Run, bool]:
    target = deliveries.target(store, Settings(), AGENT, TRIGGER)
    return deliveries.accept(
        store, Settings(), target, body, headers, "application/json", now=time.time()
    )


def _on_loop(store: Store, headers: dict[str, str], body: bytes = BODY) -> Run | None:
    found = deliveries.seen(store, AGENT, TRIGGER)
    assert found is not None
    return deliveries.retry_on_loop(store, Settings(), found, body, headers, now=time.time())


def _known(store: Store, webhook_id: str) -> Run:
    """A delivery of ``webhook_id`` and one retry (through ``accept``): answered here."""
    first, created = _accept(store, _headers(webhook_id))
    assert created
    assert _on_loop(store, _headers(webhook_id)) is None  # its record not read yet here
    again, created = _accept(store, _headers(webhook_id))
    assert not created and again.run_id == first.run_id
    return again


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store(tmp_path / "data")
    opened.create_agent(AGENT)
    Triggers(opened.backend).put(AGENT, TRIGGER, {"prompt": "p", "secret": SECRET})
    yield opened
    opened.close()


def test_a_retry_of_an_id_answered_here_is_answered_with_its_run(store: Store) -> None:
    known = _known(store, "msg_1")
    answered = _on_loop(store, _headers("msg_1"))
    assert answered == known
    # Several signatures in one header (a rotation's overlap): any valid one passes.
    headers = _headers("msg_1")
    headers["webhook-signature"] = "v1,bm90LWEtc2lnbmF0dXJl " + headers["webhook-signature"]
    assert _on_loop(store, headers) == known
    # Another id is not answered here: the pool makes its run.
    assert _on_loop(store, _headers("msg_2")) is None


@pytest.mark.parametrize(
    "case", ["wrong secret", "tampered body", "stale", "future", "no signature", "no id"]
)
def test_a_retry_accept_would_refuse_is_left_to_accept(store: Store, case: str) -> None:
    _known(store, "msg_1")
    body = BODY
    headers = _headers("msg_1")
    if case == "wrong secret":
        headers = _headers("msg_1", secret=OTHER)
    elif case == "tampered body":
        body = BODY.replace(b"opened", b"closed")
    elif case == "stale":
        headers = _headers("msg_1", skew=-301)
    elif case == "future":
        headers = _headers("msg_1", skew=301)
    elif case == "no signature":
        del headers["webhook-signature"]
    else:
        del headers["webhook-id"]
    assert _on_loop(store, headers, body) is None
    with pytest.raises(Unauthorized):
        _accept(store, headers, body)


def test_a_body_over_the_loops_bound_is_left_to_the_pool(store: Store) -> None:
    big = b"x" * (deliveries.RETRY_ON_LOOP_BYTES + 1)
    _, created = _accept(store, _headers("msg_big2", big), big)
    assert created
    again, _ = _accept(store, _headers("msg_big2", big), big)  # known here now
    assert _on_loop(store, _headers("msg_big2", big), big) is None
    assert _accept(store, _headers("msg_big2", big), big) == (again, False)


def test_the_answer_is_the_run_as_it_is_now(store: Store) -> None:
    known = _known(store, "msg_1")
    assert known.status == "queued"
    runs = Runs(store)
    assert runs.claim(known, OWNER) == known.attempt + 1
    # An event after the state kept: not answered here until ``accept`` read the row.
    assert _on_loop(store, _headers("msg_1")) is None
    running, _ = _accept(store, _headers("msg_1"))
    assert running.status == "running"
    assert _on_loop(store, _headers("msg_1")) == running
    runs.append(AGENT, known.run_id, lambda _r: {"type": "succeeded", "attempt": 1, "exitCode": 0})
    assert _on_loop(store, _headers("msg_1")) is None
    done, _ = _accept(store, _headers("msg_1"))
    assert done.status == "succeeded"
    assert _on_loop(store, _headers("msg_1")) == done


def test_a_collected_record_is_not_answered_from_memory(store: Store) -> None:
    known = _known(store, "msg_1")
    runs = Runs(store)
    runs.claim(known, OWNER)
    runs.append(AGENT, known.run_id, lambda _r: {"type": "succeeded", "attempt": 1, "exitCode": 0})
    _accept(store, _headers("msg_1"))
    assert _on_loop(store, _headers("msg_1")) is not None
    # Collected (its record deleted after the retention): the next delivery of the id
    # is a new one, and the loop does not answer it with the old run.
    assert runs.collect(time.time_ns() // 1000 + 10**12, 0) == 1
    assert _on_loop(store, _headers("msg_1")) is None
    fresh, created = _accept(store, _headers("msg_1"))
    assert created and fresh.run_id != known.run_id


def test_a_changed_or_deleted_trigger_is_left_to_accept(store: Store) -> None:
    _known(store, "msg_1")
    triggers = Triggers(store.backend)
    triggers.rotate(AGENT, TRIGGER)  # a successor record: the kept target is stale
    assert _on_loop(store, _headers("msg_1")) is None
    _accept(store, _headers("msg_1"))  # the old secret still verifies (its overlap)
    assert _on_loop(store, _headers("msg_1")) is not None
    triggers.delete(AGENT, TRIGGER)
    assert _on_loop(store, _headers("msg_1")) is None
    with pytest.raises(NotFound):
        _accept(store, _headers("msg_1"))


def test_a_retry_to_an_agent_damaged_since_is_503_on_the_loop_too(
    store: Store, tmp_path: Path
) -> None:
    _known(store, "msg_1")
    assert _on_loop(store, _headers("msg_1")) is not None
    other = Store(tmp_path / "data")  # as `memfs fsck` would, from its own connection
    try:
        other.record_damage(Damaged(AGENT, "agents/x/.memfs/log/1", "checksum mismatch"))
    finally:
        other.close()
    with pytest.raises(Damaged):
        _on_loop(store, _headers("msg_1"))
    with pytest.raises(Damaged):
        _accept(store, _headers("msg_1"))


def test_a_backend_without_files_is_always_left_to_the_pool(tmp_path: Path) -> None:
    store = Store(tmp_path / "data", backend=MemoryBackend())
    try:
        store.create_agent(AGENT)
        Triggers(store.backend).put(AGENT, TRIGGER, {"prompt": "p", "secret": SECRET})
        _accept(store, _headers("msg_1"))
        _accept(store, _headers("msg_1"))
        found = deliveries.target(store, Settings(), AGENT, TRIGGER)
        assert found.proof is None
        assert (
            deliveries.retry_on_loop(
                store, Settings(), found, BODY, _headers("msg_1"), now=time.time()
            )
            is None
        )
    finally:
        store.close()


def test_a_malformed_secret_is_refused_at_every_verification() -> None:
    # Secrets' keys are decoded once and kept; a malformed one is never kept.
    from memfs.domain.webhook_verify import verify
    from memfs.errors import InvalidRequest

    for _ in range(2):
        with pytest.raises(InvalidRequest):
            verify(["whsec_not base64!"], _headers("msg_1"), BODY, now=time.time(), tolerance_seconds=300)
    assert verify([SECRET], _headers("msg_1"), BODY, now=time.time(), tolerance_seconds=300) == "msg_1"
