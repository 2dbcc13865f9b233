"""The client's trigger, delivery, run and inspect methods against a real server."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from memfs.client import Client, ConflictError, InvalidRequestError, Run
from servers import MemfsServer

AGENT = "users/carol/assistant"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemfsServer]:
    running = MemfsServer(tmp_path_factory.mktemp("client-runs") / "data")
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def memfs(server: MemfsServer) -> Iterator[Client]:
    with Client(server.url, server.admin_key) as client:
        client.put_agent(AGENT, name="Carol")
        yield client


def wait(memfs: Client, run_id: str) -> Run:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        run = memfs.get_run(AGENT, run_id)
        if run.status in ("succeeded", "failed"):
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} did not end")


def test_triggers_deliveries_and_runs(memfs: Client) -> None:
    created = memfs.put_trigger(AGENT, "inbox", prompt="file it")
    assert created.secret is not None and created.secret.startswith("whsec_")
    assert memfs.get_trigger(AGENT, "inbox").secret is None
    assert [t.trigger_id for t in memfs.list_triggers(AGENT)] == ["inbox"]

    run, started = memfs.deliver(
        AGENT, "inbox", b'{"n": 1}', secret=created.secret, webhook_id="w1"
    )
    again, started_again = memfs.deliver(
        AGENT, "inbox", b'{"n": 1}', secret=created.secret, webhook_id="w1"
    )
    assert started and not started_again and again.id == run.id
    assert wait(memfs, run.id).status == "succeeded"
    assert [r.id for r in memfs.iter_runs(AGENT, trigger_id="inbox")] == [run.id]
    with pytest.raises(ConflictError):
        memfs.retry_run(AGENT, run.id)  # only failed runs can be retried

    rotated = memfs.rotate_trigger_secret(AGENT, "inbox")
    assert rotated.secret and rotated.secret != created.secret
    memfs.delete_trigger(AGENT, "inbox")
    assert memfs.list_triggers(AGENT) == []


def test_inspect_iterators_are_pinned_and_complete(memfs: Client) -> None:
    for i in range(7):
        memfs.put_memory(AGENT, f"/memories/notes/n{i}.md", f"# N{i}\nsee [[notes/n0]]\n")
    first = memfs.inspect({"log": {"limit": 1}}, agent_id=AGENT)
    pinned = first.read_timestamp
    before = list(memfs.iter_log(agent_id=AGENT, as_of=pinned, limit=2))
    memfs.put_memory(AGENT, "/memories/notes/later.md", "# later\n")
    after = list(memfs.iter_log(agent_id=AGENT, as_of=pinned, limit=2))
    assert before == after  # a walk pinned at one instant never changes
    latest = list(memfs.iter_log(agent_id=AGENT, limit=3))
    assert len(latest) == len(after) + 1
    chunks = list(memfs.iter_chunks(agent_id=AGENT, limit=3))
    assert {c["path"] for c in chunks} >= {f"/memories/notes/n{i}.md" for i in range(7)}
    nodes = list(memfs.iter_nodes(scope_id="users/carol", limit=2))
    notes = [n for n in nodes if n["path"].startswith("/memories/notes/")]
    assert len(notes) == 8 and len({n["id"] for n in nodes}) == len(nodes)
    edges = list(memfs.iter_edges(agent_id=AGENT, limit=2))
    assert {e["targetPath"] for e in edges} == {"/memories/notes/n0.md"}
    with pytest.raises(InvalidRequestError) as refused:
        memfs.inspect({"log": {}, "asOf": "2999-01-01T00:00:00Z"}, agent_id=AGENT)
    assert refused.value.field == "asOf"
