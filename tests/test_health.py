"""``/healthz``, ``/readyz`` and ``/metrics`` through the in-process app.

No key, no ``Memfs-Protocol``, any ``Origin``; ``/metrics`` is prometheus_client's text
format and never names an agent, a path or a key. The multi-worker sums are proved
with a real server in tests/test_metrics_processes.py.
"""

from __future__ import annotations

import datetime as dt
import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from standardwebhooks import Webhook
from starlette.testclient import TestClient

from http_fixtures import AGENT, Api, agent_url, assert_error, enc, open_api, settings
from memfs.canonical import layout
from memfs.core.store import Store
from memfs.http.app import build

SECRET_AGENT = "tenants/zqx-distinct-owner/agent-7731"
SECRET_PATH = "/memories/private/zqx-distinctive-note.md"


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with open_api(tmp_path) as opened:
        opened.create_agent()
        yield opened


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape, by name and sorted labels (parsed by prometheus_client)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def scrape(api: Api) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = api.get("/metrics", auth=None, protocol=None)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    return samples(response.text)


def requests_of(scraped: dict[tuple[str, tuple[tuple[str, str], ...]], float], route: str) -> float:
    return sum(
        v
        for (name, labels), v in scraped.items()
        if name == "memfs_http_requests_total" and ("route", route) in labels
    )


def test_healthz_needs_no_key_no_protocol_and_ignores_origin(api: Api) -> None:
    for headers in ({}, {"Origin": "https://example.com"}):
        response = api.get("/healthz", auth=None, protocol=None, headers=headers)
        assert response.status_code == 200 and response.json() == {"status": "ok"}
        assert response.headers["memfs-request-id"].startswith("req_")
        assert "access-control-allow-origin" not in response.headers
    # /v1 still refuses an Origin: only the monitors are exempt.
    refused = api.get(agent_url(AGENT, "/memories"), headers={"Origin": "https://example.com"})
    assert_error(refused, 403, "forbidden", "Origin")


def test_readyz_is_200_when_caught_up_and_503_while_the_log_is_ahead(
    api: Api, tmp_path: Path
) -> None:
    ready = api.get("/readyz", auth=None, protocol=None)
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}
    # A log entry the index has not applied (another process's, or a crashed writer's):
    # made in a copy of the data folder, then dropped into this one.
    twin = tmp_path / "twin"
    shutil.copytree(api.data, twin)

    other = Store(twin)  # a second process's view of the same agent
    other.write(AGENT, "/memories/ahead.md", b"ahead", actor="admin")
    other.close()
    # The entry is a frame of the twin's segment: the segments folder is dropped in.
    segments = f"{layout.log_prefix(AGENT)}segments"
    shutil.copytree(twin / segments, api.data / segments, dirs_exist_ok=True)
    behind = assert_error(api.get("/readyz", auth=None, protocol=None), 503, "unavailable")
    assert behind["details"]["retryable"] is True
    assert "catching up" in behind["message"] and AGENT not in behind["message"]
    lag = scrape(api)[("memfs_index_lag_entries", ())]
    assert lag == 1
    # Any write catches the index up with the log first; then it is ready again.
    api.write("/memories/next.md", "x")
    assert api.get("/readyz", auth=None, protocol=None).status_code == 200
    assert scrape(api)[("memfs_index_lag_entries", ())] == 0
    assert api.get(agent_url(AGENT, "/memories/ahead.md")).status_code == 200


def test_readyz_is_503_while_the_index_schema_is_not_current(api: Api) -> None:
    conn = sqlite3.connect(layout.index_path(api.data))
    with conn:
        conn.execute("UPDATE meta SET value=99 WHERE key='schema'")
    conn.close()
    body = assert_error(api.get("/readyz", auth=None, protocol=None), 503, "unavailable")
    assert body["details"]["retryable"] is True
    assert api.get("/healthz", auth=None, protocol=None).status_code == 200


def test_metrics_count_by_route_template_and_never_name_agents_or_paths(api: Api) -> None:
    before = scrape(api)
    api.create_agent(SECRET_AGENT)
    assert api.write(SECRET_PATH, "top secret text", agent_id=SECRET_AGENT).status_code == 201
    for _ in range(3):
        got = api.get(f"/v1/agents/{enc(SECRET_AGENT)}/memories/private/zqx-distinctive-note.md")
        assert got.status_code == 200
    missing = api.get(f"/v1/agents/{enc(SECRET_AGENT)}/memories/private/zqx-nothing.md")
    assert missing.status_code == 404
    api.get("/v1/zqx-no-such-route", auth=None)
    response = api.get("/metrics", auth=None, protocol=None, headers={"Origin": "https://x.org"})
    assert response.status_code == 200
    text = response.text
    for secret in ("zqx", SECRET_AGENT, enc(SECRET_AGENT), "distinctive", "top secret"):
        assert secret not in text, secret
    after = samples(text)
    route = "/v1/agents/{agentId}/memories/{path}"

    def delta(key: tuple[str, tuple[tuple[str, str], ...]]) -> float:
        return after.get(key, 0) - before.get(key, 0)

    labels = (("method", "GET"), ("route", route), ("status", "200"))
    assert delta(("memfs_http_requests_total", labels)) == 3
    assert delta(("memfs_http_request_duration_seconds_count", labels)) == 3
    not_found = (("method", "GET"), ("route", route), ("status", "404"))
    assert delta(("memfs_http_requests_total", not_found)) == 1
    unmatched = (("method", "GET"), ("route", "unmatched"), ("status", "404"))
    assert delta(("memfs_http_requests_total", unmatched)) == 1
    assert delta(("memfs_commits_total", ())) == 1  # the write (agent creation is no commit)
    assert after[("memfs_agents_damaged", ())] == 0
    assert after[("memfs_runs", (("state", "queued"),))] == 0


def test_metrics_count_deliveries_and_runs(tmp_path: Path) -> None:
    with open_api(tmp_path) as api:
        api.create_agent()
        created = api.put(agent_url(AGENT, "/triggers/gh"), json={})
        secret = created.json()["secret"]
        before = scrape(api)
        url = agent_url(AGENT, "/triggers/gh:deliver")
        now = int(time.time())

        def send(webhook_id: str, signature: str | None = None) -> int:
            body = b"{}"
            signed = Webhook(secret).sign(webhook_id, _dt(now), body.decode())
            headers = {
                "webhook-id": webhook_id,
                "webhook-timestamp": str(now),
                "webhook-signature": signature or signed,
            }
            response = api.post(url, content=body, headers=headers, auth=None, protocol=None)
            return response.status_code

        assert [send("m1"), send("m1"), send("m2"), send("m3", "v1,AAAA")] == [202, 200, 202, 401]
        after = scrape(api)
        for outcome, count in (("new", 2), ("duplicate", 1), ("refused", 1)):
            key = ("memfs_webhook_deliveries_total", (("outcome", outcome),))
            assert after.get(key, 0) - before.get(key, 0) == count, outcome
        # The runner is off here (open_api): both runs wait, counted by state.
        assert after[("memfs_runs", (("state", "queued"),))] == 2


def _dt(stamp: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(stamp, tz=dt.UTC)


def test_metrics_time_run_attempts_and_count_runs_by_state(tmp_path: Path) -> None:
    app = build(settings(tmp_path, memory_bytes=1024, retry_base_ms=0))
    with TestClient(app) as client:  # with its lifespan: the runner executes runs
        api = Api(client, app, tmp_path / "data")
        api.create_agent()
        secret = api.put(agent_url(AGENT, "/triggers/gh"), json={"maxAttempts": 1}).json()["secret"]
        # A folder stands where the second delivery's memory would go: its run fails.
        api.must_write("/memories/inbox/gh/blocked.md/x.md", "in the way")
        before = scrape(api)
        now = int(time.time())
        ids = []
        for webhook_id, body in (("ok", "{}"), ("blocked", "{}")):
            headers = {
                "webhook-id": webhook_id,
                "webhook-timestamp": str(now),
                "webhook-signature": Webhook(secret).sign(webhook_id, _dt(now), body),
            }
            sent = api.post(
                agent_url(AGENT, "/triggers/gh:deliver"),
                content=body.encode(),
                headers=headers,
                auth=None,
                protocol=None,
            )
            assert sent.status_code == 202, sent.text
            ids.append(sent.json()["id"])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            states = [api.get(agent_url(AGENT, f"/runs/{i}")).json()["status"] for i in ids]
            if all(s in ("succeeded", "failed") for s in states):
                break
            time.sleep(0.05)
        assert states == ["succeeded", "failed"]  # the second meets the folder
        after = scrape(api)
    for outcome in ("succeeded", "failed"):
        key = (
            "memfs_run_attempt_duration_seconds_count",
            (("action", "memory"), ("outcome", outcome)),
        )
        assert after.get(key, 0) - before.get(key, 0) == 1, outcome
    assert after[("memfs_runs", (("state", "succeeded"),))] == 1
    assert after[("memfs_runs", (("state", "failed"),))] == 1
