"""The delivery flow and the summary state as core functions, with no HTTP in between.

``core.deliveries`` judges a sender's delivery in one place (unknown URL → 404, a body
over the trigger's limit → 413, a bad signature → 401, then exactly one run per
webhook id, the runner woken once); ``core.summary`` is the one state machine of an
agent's summary. An MCP server or a console calls the same two functions.
"""

from __future__ import annotations

import base64
import time

import pytest

from memfs.config import Settings
from memfs.core import deliveries
from memfs.core.runs import Runs
from memfs.core.store import Store
from memfs.core.summary import summary
from memfs.core.triggers import Triggers
from memfs.domain.webhook_verify import sign
from memfs.errors import NotFound, PayloadTooLarge, Unauthorized

SECRET = "whsec_" + base64.b64encode(b"core-secret-of-32-bytes-exactly!").decode()
TRIGGER = "gh"


def headers(webhook_id: str, body: bytes, secret: str = SECRET) -> dict[str, str]:
    stamp = int(time.time())
    return {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(secret, webhook_id, stamp, body),
    }


@pytest.fixture
def target(store: Store, agent: str) -> deliveries.Target:
    Triggers(store.backend).put(agent, TRIGGER, {"secret": SECRET, "prompt": "p"})
    return deliveries.target(store, Settings(), agent, TRIGGER)


def all_runs(store: Store, agent_id: str) -> list[str]:
    rows = Runs(store).list(agent_id, trigger_id=None, status=None, after=None, limit=10)
    return [r.run_id for r in rows]


def accept(
    store: Store, target: deliveries.Target, webhook_id: str, body: bytes, woken: list[int]
) -> tuple[str, bool]:
    run, created = deliveries.accept(
        store,
        Settings(),
        target,
        body,
        headers(webhook_id, body),
        "application/json",
        now=time.time(),
        wake=lambda: woken.append(1),
    )
    return run.run_id, created


def test_one_answer_for_an_unknown_agent_and_an_unknown_trigger(store: Store, agent: str) -> None:
    with pytest.raises(NotFound) as unknown_trigger:
        deliveries.target(store, Settings(), agent, "nope")
    with pytest.raises(NotFound) as unknown_agent:
        deliveries.target(store, Settings(), "ghost", TRIGGER)
    assert unknown_trigger.value.message == unknown_agent.value.message
    assert unknown_trigger.value.field == unknown_agent.value.field == "triggerId"


def test_a_memory_action_takes_at_most_memory_bytes(target: deliveries.Target) -> None:
    assert target.body_limit == Settings().memory_bytes
    explained = target.explain(PayloadTooLarge("body too large", field="body"))
    assert "memoryBytes" in explained.message


def test_each_webhook_id_makes_exactly_one_run_and_one_wake(
    store: Store, target: deliveries.Target
) -> None:
    woken: list[int] = []
    first = accept(store, target, "msg_1", b'{"a": 1}', woken)
    again = accept(store, target, "msg_1", b'{"a": 1}', woken)
    other = accept(store, target, "msg_2", b'{"a": 2}', woken)
    assert first[1] is True and other[1] is True
    assert again == (first[0], False)
    assert other[0] != first[0]
    assert len(woken) == 2  # a retry wakes nobody
    assert len(all_runs(store, target.agent_id)) == 2


def test_a_bad_signature_writes_nothing(store: Store, target: deliveries.Target) -> None:
    body = b"{}"
    bad = headers("msg_bad", body, secret="whsec_" + base64.b64encode(b"x" * 32).decode())
    with pytest.raises(Unauthorized):
        deliveries.accept(store, Settings(), target, body, bad, "application/json", now=time.time())
    assert all_runs(store, target.agent_id) == []


def test_a_body_whose_memory_exceeds_memory_bytes_is_refused(
    store: Store, target: deliveries.Target
) -> None:
    settings = Settings(memory_bytes=300)
    body = b"x" * 290  # fits the body limit, not with the memory's frontmatter
    with pytest.raises(PayloadTooLarge) as refused:
        deliveries.accept(
            store, settings, target, body, headers("msg_big", body), "text/plain", now=time.time()
        )
    assert "memoryBytes" in refused.value.message
    assert all_runs(store, target.agent_id) == []


def test_summary_waits_before_the_first_memory_then_idles(store: Store, agent: str) -> None:
    before = summary(store, agent)
    assert (before["state"], before["memoryCount"], before["pendingRunCount"]) == ("waiting", 0, 0)
    store.rename_agent(agent, "Renamed", actor="test")  # a commit that writes no memory
    assert summary(store, agent)["state"] == "waiting"
    store.write(agent, "/memories/a.md", b"hello", actor="test")
    after = summary(store, agent)
    assert (after["state"], after["memoryCount"], after["agentName"]) == ("idle", 1, "Renamed")
    assert after["lastUpdatedAt"] is not None


def test_summary_counts_queued_runs_as_pending(store: Store, target: deliveries.Target) -> None:
    accept(store, target, "msg_1", b"{}", [])
    state = summary(store, target.agent_id)
    assert (state["pendingRunCount"], state["failedRunCount"]) == (1, 0)
    assert state["state"] == "idle"  # queued, not yet running


def test_summary_of_an_unknown_agent_is_not_found(store: Store) -> None:
    with pytest.raises(NotFound):
        summary(store, "ghost")
