"""A delivery's target (agent and trigger) is kept by the server, and still exact.

A worker keeps the target of each trigger it delivered to, with the identity of the
files that define it (the agent's record, the trigger's newest record), and reads the
body with the limit it kept without touching the disk on its event loop; the target
is checked again, in the same trip to a worker thread as the signature and the
exactly-once judgement, before anything is decided. These tests change a kept target
from ANOTHER process (the ``memfs`` command line on the same data folder, while a real
``memfs serve`` runs) and check that the very next delivery sees the change:

- a trigger deleted there answers 404 (a new id and a retried one alike), and made
  again with another secret refuses the old one;
- an agent erased there answers 404, and made again with a trigger of the same id
  refuses the secret of the erased one;
- a trigger whose action changed there gets the body limit of its new action: a body
  a command action takes is refused with 413 once it is a memory action (nothing
  stored), and taken once it is a command again.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest
from standardwebhooks import Webhook

from memfs.core.store import Store
from memfs.errors import Damaged
from servers_real import RealServer, memfs_cli

MEMORY_BYTES = 8192
BIG = "x" * (3 * MEMORY_BYTES)  # over memoryBytes, under webhookBodyBytes


def _secret(n: int) -> str:
    return "whsec_" + base64.b64encode(bytes([n]) * 32).decode()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealServer]:
    data = tmp_path_factory.mktemp("targets") / "data"
    srv = RealServer(data, workers=1, extra_args=("--memory-bytes", str(MEMORY_BYTES)))
    with srv.start():
        yield srv


def _cli(server: RealServer, *args: str) -> None:
    done = memfs_cli(*args, data=server.data)
    assert done.returncode == 0, done.stdout + done.stderr


def _deliver(
    server: RealServer, agent: str, secret: str, webhook_id: str, body: str = '{"n": 1}'
) -> httpx.Response:
    now = dt.datetime.now(dt.UTC)
    url = f"/v1/agents/{quote(agent, safe='')}/triggers/gh:deliver"
    # No Authorization, no Memfs-Protocol: a sender has neither.
    with httpx.Client(base_url=server.url, timeout=30) as client:
        return client.post(
            url,
            content=body.encode(),
            headers={
                "webhook-id": webhook_id,
                "webhook-timestamp": str(int(now.timestamp())),
                "webhook-signature": Webhook(secret).sign(webhook_id, now, body),
                "Content-Type": "application/json",
            },
        )


def test_a_trigger_deleted_or_made_again_elsewhere_is_seen_by_the_next_delivery(
    server: RealServer,
) -> None:
    agent = "users/alice/deleted"
    _cli(server, "agents", "create", agent)
    _cli(server, "triggers", "add", agent, "gh", "--secret", _secret(1))
    assert _deliver(server, agent, _secret(1), "msg_1").status_code == 202
    assert _deliver(server, agent, _secret(1), "msg_1").status_code == 200  # kept now

    _cli(server, "triggers", "rm", agent, "gh")
    assert _deliver(server, agent, _secret(1), "msg_2").status_code == 404
    assert _deliver(server, agent, _secret(1), "msg_1").status_code == 404

    _cli(server, "triggers", "add", agent, "gh", "--secret", _secret(2))
    assert _deliver(server, agent, _secret(1), "msg_3").status_code == 401
    assert _deliver(server, agent, _secret(2), "msg_3").status_code == 202


def test_an_agent_erased_or_made_again_elsewhere_is_seen_by_the_next_delivery(
    server: RealServer,
) -> None:
    agent = "users/alice/erased"
    _cli(server, "agents", "create", agent)
    _cli(server, "triggers", "add", agent, "gh", "--secret", _secret(3))
    assert _deliver(server, agent, _secret(3), "msg_1").status_code == 202
    assert _deliver(server, agent, _secret(3), "msg_2").status_code == 202  # kept now

    _cli(server, "agents", "rm", agent, "--yes")
    assert _deliver(server, agent, _secret(3), "msg_3").status_code == 404
    assert _deliver(server, agent, _secret(3), "msg_1").status_code == 404

    # The same agent id, trigger id and record number again: only the secret differs.
    _cli(server, "agents", "create", agent)
    _cli(server, "triggers", "add", agent, "gh", "--secret", _secret(4))
    assert _deliver(server, agent, _secret(3), "msg_4").status_code == 401
    assert _deliver(server, agent, _secret(4), "msg_4").status_code == 202


def test_a_trigger_whose_action_changed_elsewhere_gets_its_new_body_limit(
    server: RealServer,
) -> None:
    agent = "users/alice/limits"
    secret = _secret(5)
    _cli(server, "agents", "create", agent)
    _cli(server, "triggers", "add", agent, "gh", "--secret", secret)
    assert _deliver(server, agent, secret, "small_1").status_code == 202
    assert _deliver(server, agent, secret, "big_0", BIG).status_code == 413  # memoryBytes

    # A command action takes up to webhookBodyBytes: the kept (memory) limit is not it.
    # --command takes the rest of the line, so --data goes before it (and the --data
    # memfs_cli appends becomes arguments of ``true``, which ignores them).
    data = str(server.data)
    _cli(server, "triggers", "add", agent, "gh", "--secret", secret, "--data", data,
         "--command", "true")  # fmt: skip
    assert _deliver(server, agent, secret, "big_1", BIG).status_code == 202

    # A memory action again: the body the kept (command) limit lets through is refused.
    _cli(server, "triggers", "add", agent, "gh", "--secret", secret)
    refused = _deliver(server, agent, secret, "big_2", BIG)
    assert refused.status_code == 413, refused.text
    assert "memoryBytes" in refused.text
    with server.client() as client:
        runs = client.get(f"/v1/agents/{quote(agent, safe='')}/runs").json()["runs"]
    assert sorted(r["webhookId"] for r in runs) == ["big_1", "small_1"]


def test_an_agent_damaged_since_its_target_was_kept_answers_503_not_202(
    server: RealServer,
) -> None:
    agent = "users/alice/damaged"
    _cli(server, "agents", "create", agent)
    _cli(server, "triggers", "add", agent, "gh", "--secret", _secret(4))
    assert _deliver(server, agent, _secret(4), "msg_d1").status_code == 202  # kept now
    # Another process marks the agent damaged in the shared index (as `memfs fsck` or
    # `reindex` does when a log entry fails its check).
    other = Store(server.data)
    try:
        other.record_damage(Damaged(agent, "agents/x/.memfs/log/1", "checksum mismatch"))
    finally:
        other.close()
    refused = _deliver(server, agent, _secret(4), "msg_d2")
    assert refused.status_code == 503, refused.text
    assert "is damaged" in refused.json()["message"]
    # Nothing was accepted for it (no delivery record, so no run to fail later while
    # the agent can't store); the first delivery's record is where records are.
    names = {p.name for p in server.data.rglob("*.json")}
    assert f"{hashlib.sha256(b'msg_d1').hexdigest()}.json" in names
    assert f"{hashlib.sha256(b'msg_d2').hexdigest()}.json" not in names


def test_a_retry_to_an_agent_damaged_since_answers_503_not_its_run(
    server: RealServer,
) -> None:
    # A retry is answered on the event loop once this worker answered its id; damage
    # marked by another process must still refuse it, as it refuses a new id.
    agent = "users/alice/damaged-retry"
    _cli(server, "agents", "create", agent)
    _cli(server, "triggers", "add", agent, "gh", "--secret", _secret(5))
    first = _deliver(server, agent, _secret(5), "msg_r1")
    assert first.status_code == 202
    for _ in range(3):  # the first retry reads the record; the next ones are kept
        again = _deliver(server, agent, _secret(5), "msg_r1")
        assert again.status_code == 200 and again.json()["id"] == first.json()["id"]
    other = Store(server.data)
    try:
        other.record_damage(Damaged(agent, "agents/x/.memfs/log/1", "checksum mismatch"))
    finally:
        other.close()
    refused = _deliver(server, agent, _secret(5), "msg_r1")
    assert refused.status_code == 503, refused.text
    assert "is damaged" in refused.json()["message"]
