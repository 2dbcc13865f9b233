"""Triggers, Standard-Webhooks deliveries and runs through the in-process app.

The app runs with its lifespan (TestClient), so its Runner executes runs in the
background as a server would; tests poll a run until it ends.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks import Webhook
from starlette.testclient import TestClient

from commands import child_python, shared_folder
from http_fixtures import AGENT, Api, agent_url, assert_error, settings
from memfs.domain.webhook_verify import sign
from memfs.http.app import build


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    # Unlike the other HTTP tests, these keep the app's run executor on.
    app = build(settings(tmp_path, retry_base_ms=50, allow_commands=True))
    with TestClient(app) as client:
        opened = Api(client, app, tmp_path / "data")
        opened.create_agent()
        yield opened


@pytest.fixture
def shared() -> Iterator[Path]:
    with shared_folder() as folder:
        yield folder


def add_trigger(api: Api, trigger: str = "gh", **body: Any) -> dict[str, Any]:
    response = api.put(agent_url(AGENT, f"/triggers/{trigger}"), json=body)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def deliver(
    api: Api,
    secret: str,
    body: bytes,
    *,
    webhook_id: str = "msg_1",
    trigger: str = "gh",
    stamp: int | None = None,
    headers: dict[str, str] | None = None,
) -> Any:
    stamp = int(time.time()) if stamp is None else stamp
    sent = {
        "webhook-id": webhook_id,
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(secret, webhook_id, stamp, body),
        "Content-Type": "application/json",
        **(headers or {}),
    }
    return api.post(
        agent_url(AGENT, f"/triggers/{trigger}:deliver"),
        content=body,
        headers=sent,
        auth=None,
        protocol=None,
    )


def wait_run(api: Api, run_id: str, *, until: tuple[str, ...] = ("succeeded", "failed")) -> Any:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        run = api.get(agent_url(AGENT, f"/runs/{run_id}")).json()
        if run["status"] in until:
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} did not reach {until}: {run}")


# ---- triggers ----------------------------------------------------------------------


def test_trigger_secret_is_generated_shown_once_and_well_formed(api: Api) -> None:
    created = add_trigger(api, prompt="triage")
    assert created["secret"].startswith("whsec_")
    assert len(created["secret"]) >= len("whsec_") + 32  # base64 of >= 24 bytes
    shown = api.get(agent_url(AGENT, "/triggers/gh")).json()
    assert "secret" not in shown and shown["prompt"] == "triage"
    listed = api.get(agent_url(AGENT, "/triggers")).json()
    assert [t["triggerId"] for t in listed["triggers"]] == ["gh"]
    assert listed["nextCursor"] is None
    assert "secret" not in listed["triggers"][0]


def test_trigger_update_keeps_secret_and_delete_removes_it(api: Api) -> None:
    secret = add_trigger(api)["secret"]
    updated = api.put(agent_url(AGENT, "/triggers/gh"), json={"prompt": "new"})
    assert updated.status_code == 200 and "secret" not in updated.json()
    assert deliver(api, secret, b"{}").status_code == 202
    assert api.delete(agent_url(AGENT, "/triggers/gh")).status_code == 204
    assert_error(api.get(agent_url(AGENT, "/triggers/gh")), 404, "not_found")
    assert_error(deliver(api, secret, b"{}", webhook_id="msg_2"), 404, "not_found")


@pytest.mark.parametrize(
    "body, field",
    [
        ({"maxAttempts": 0}, "maxAttempts"),
        ({"action": {"type": "shell"}}, "action.type"),
        ({"action": {"type": "command", "argv": []}}, "action.argv"),
        (
            {"action": {"type": "command", "argv": ["x"], "timeoutSeconds": 0}},
            "action.timeoutSeconds",
        ),
        ({"action": {"type": "memory", "path": "/notes/{webhookId}"}}, "action.path"),
        ({"secret": "not-a-secret"}, "secret"),
        ({"colour": "red"}, "colour"),
    ],
)
def test_bad_trigger_definitions_are_refused(api: Api, body: dict[str, Any], field: str) -> None:
    assert_error(
        api.put(agent_url(AGENT, "/triggers/t1"), json=body), 400, "invalid_request", field
    )
    assert_error(api.get(agent_url(AGENT, "/triggers/t1")), 404, "not_found")


def test_rotated_secret_keeps_the_old_one_for_24_hours(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = add_trigger(api)["secret"]
    rotated = api.post(agent_url(AGENT, "/triggers/gh:rotateSecret"))
    assert rotated.status_code == 200
    new = rotated.json()["secret"]
    assert new != old
    assert deliver(api, old, b"{}", webhook_id="a").status_code == 202
    assert deliver(api, new, b"{}", webhook_id="b").status_code == 202
    import memfs.http.triggers as routes

    later = time.time() + 24 * 3600 + 60
    monkeypatch.setattr(routes.time, "time", lambda: later)
    assert_error(deliver(api, old, b"{}", webhook_id="c", stamp=int(later)), 401, "unauthorized")
    assert deliver(api, new, b"{}", webhook_id="d", stamp=int(later)).status_code == 202


# ---- deliveries ----------------------------------------------------------------------


def test_first_delivery_202_retries_200_with_the_same_run(api: Api) -> None:
    secret = add_trigger(api)["secret"]
    first = deliver(api, secret, b'{"n": 1}')
    assert first.status_code == 202
    run = first.json()
    assert run["status"] in ("queued", "running", "succeeded") and run["webhookId"] == "msg_1"
    again = deliver(api, secret, b'{"n": 1}')
    assert again.status_code == 200 and again.json()["id"] == run["id"]
    runs = api.get(agent_url(AGENT, "/runs")).json()["runs"]
    assert [r["id"] for r in runs] == [run["id"]]


def test_library_signed_delivery_stores_the_body_as_a_memory(api: Api) -> None:
    secret = add_trigger(api, prompt="file this")["secret"]
    body = '{"action": "opened", "title": "Ünïcode"}'
    now = dt.datetime.now(dt.UTC)
    signature = Webhook(secret).sign("msg_lib", now, body)
    response = api.post(
        agent_url(AGENT, "/triggers/gh:deliver"),
        content=body.encode(),
        headers={
            "webhook-id": "msg_lib",
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": signature,
            "Content-Type": "application/json",
            "Authorization": "Bearer nonsense",  # ignored on deliveries
        },
        auth=None,
        protocol=None,
    )
    assert response.status_code == 202, response.text
    run = wait_run(api, response.json()["id"])
    assert run["status"] == "succeeded"
    memory = api.get(agent_url(AGENT, "/memories/inbox/gh/msg_lib.md")).json()
    assert memory["content"].endswith(body)
    assert memory["metadata"]["prompt"] == "file this"
    assert memory["metadata"]["webhookId"] == "msg_lib"
    assert memory["metadata"]["contentType"] == "application/json"
    versions = api.versions("/memories/inbox/gh/msg_lib.md")
    assert versions[0]["actor"] == f"run:{run['id']}"


@pytest.mark.parametrize("body", [b"", b"\xef\xbb\xbf{}", bytes(range(256)), b"\x00\xff\xfe"])
def test_binary_empty_and_bom_bodies_are_verified_over_raw_bytes(api: Api, body: bytes) -> None:
    secret = add_trigger(api)["secret"]
    response = deliver(api, secret, body, headers={"Content-Type": "application/octet-stream"})
    assert response.status_code == 202, response.text
    run = wait_run(api, response.json()["id"])
    assert run["status"] == "succeeded", run
    text = api.get(agent_url(AGENT, "/memories/inbox/gh/msg_1.md")).json()["content"]
    if body and not body.startswith(b"\xef\xbb\xbf"):
        assert "```base64" in text  # not UTF-8 text: kept as base64 with its media type
        assert "application/octet-stream" in text


def test_check_order_unknown_trigger_then_size_then_signature(api: Api) -> None:
    secret = add_trigger(api)["secret"]
    big = b"x" * (256 * 1024 + 1)
    # unknown trigger: 404 even with a huge unsigned body
    assert_error(deliver(api, secret, big, trigger="nope"), 404, "not_found")
    # over the limit: 413 before the signature is looked at
    unsigned = api.post(
        agent_url(AGENT, "/triggers/gh:deliver"), content=big, auth=None, protocol=None
    )
    assert_error(unsigned, 413, "payload_too_large")
    # within the limit but unsigned: 401 naming the header
    small = api.post(
        agent_url(AGENT, "/triggers/gh:deliver"), content=b"{}", auth=None, protocol=None
    )
    body = assert_error(small, 401, "unauthorized")
    assert "webhook-id" in body["message"]
    assert api.get(agent_url(AGENT, "/runs")).json()["runs"] == []


def test_lying_and_chunked_oversize_bodies_are_refused(api: Api) -> None:
    secret = add_trigger(api)["secret"]
    big = b"y" * (256 * 1024 + 10)
    stamp = int(time.time())
    headers = {
        "webhook-id": "m",
        "webhook-timestamp": str(stamp),
        "webhook-signature": sign(secret, "m", stamp, big),
    }

    def chunks() -> Iterator[bytes]:
        for i in range(0, len(big), 8192):
            yield big[i : i + 8192]

    chunked = api.post(
        agent_url(AGENT, "/triggers/gh:deliver"),
        content=chunks(),
        headers=headers,
        auth=None,
        protocol=None,
    )
    assert_error(chunked, 413, "payload_too_large")
    lying = api.post(
        agent_url(AGENT, "/triggers/gh:deliver"),
        content=big,
        headers={**headers, "Content-Length": "10"},
        auth=None,
        protocol=None,
    )
    assert lying.status_code in (400, 413)
    assert api.get(agent_url(AGENT, "/runs")).json()["runs"] == []


@pytest.mark.parametrize("stamp", ["1.5", "+1", "1_0", "", "abc"])
def test_malformed_timestamps_are_401(api: Api, stamp: str) -> None:
    secret = add_trigger(api)["secret"]
    response = deliver(api, secret, b"{}", headers={"webhook-timestamp": stamp})
    assert "webhook-timestamp" in assert_error(response, 401, "unauthorized")["message"]


@pytest.mark.parametrize("offset, ok", [(-298, True), (298, True), (-303, False), (303, False)])
def test_timestamp_tolerance_both_ways(api: Api, offset: int, ok: bool) -> None:
    # The exact ±300 s boundary is pinned with a fixed clock in test_webhook_verify.py.
    secret = add_trigger(api)["secret"]
    response = deliver(api, secret, b"{}", stamp=int(time.time()) + offset)
    if ok:
        assert response.status_code == 202, response.text
    else:
        assert_error(response, 401, "unauthorized")


def test_millisecond_timestamp_is_refused(api: Api) -> None:
    secret = add_trigger(api)["secret"]
    assert_error(deliver(api, secret, b"{}", stamp=int(time.time() * 1000)), 401, "unauthorized")


def test_malformed_signature_entries_are_skipped(api: Api) -> None:
    secret = add_trigger(api)["secret"]
    stamp = int(time.time())
    good = sign(secret, "msg_1", stamp, b"{}")
    response = deliver(
        api,
        secret,
        b"{}",
        stamp=stamp,
        headers={"webhook-signature": f"v1 v1,!!! v2,abc v1a,{good[3:]} {good}"},
    )
    assert response.status_code == 202, response.text
    only_bad = deliver(
        api, secret, b"{}", webhook_id="msg_2", headers={"webhook-signature": "v1,!!! nonsense v1,"}
    )
    assert_error(only_bad, 401, "unauthorized")


# ---- runs ----------------------------------------------------------------------------


def command_trigger(api: Api, script: str, *, max_attempts: int = 5, **action: Any) -> str:
    created = add_trigger(
        api,
        "cmd",
        maxAttempts=max_attempts,
        action={"type": "command", "argv": [child_python(), "-c", script], **action},
    )
    secret: str = created["secret"]
    return secret


def test_command_run_gets_body_env_and_a_key_for_this_agent_only(
    api: Api, shared: Path
) -> None:
    out = shared / "seen.json"
    script = (
        "import json, os, sys; "
        f"json.dump({{'body': sys.stdin.read(), 'cwd': os.getcwd(), "
        "'file': open(os.environ['MEMFS_BODY_FILE']).read(), "
        "'env': {k: v for k, v in os.environ.items() if k.startswith('MEMFS_')}}, "
        f"open({str(out)!r}, 'w')); print('done')"
    )
    secret = command_trigger(api, script)
    response = deliver(api, secret, b'{"x": 1}', trigger="cmd")
    run = wait_run(api, response.json()["id"])
    assert run["status"] == "succeeded" and run["exitCode"] == 0
    assert run["output"].strip() == "done"
    seen = json.loads(out.read_text())
    assert seen["body"] == '{"x": 1}' and seen["file"] == '{"x": 1}'
    env = seen["env"]
    for name in (
        "MEMFS_URL",
        "MEMFS_TOKEN",
        "MEMFS_AGENT_ID",
        "MEMFS_RUN_ID",
        "MEMFS_TRIGGER_ID",
        "MEMFS_WEBHOOK_ID",
        "MEMFS_PROMPT",
        "MEMFS_CONTENT_TYPE",
    ):
        assert name in env, name
    assert env["MEMFS_AGENT_ID"] == AGENT and env["MEMFS_RUN_ID"] == run["id"]
    # the run's key was limited to this agent's memories and is revoked once the run ended
    token = env["MEMFS_TOKEN"]
    assert_error(api.get(agent_url(AGENT, "/memories"), auth=token), 401, "unauthorized")
    assert not Path(seen["cwd"]).exists()  # the per-attempt working folder is cleaned up


def test_failing_command_retries_with_backoff_then_fails_and_can_be_retried(api: Api) -> None:
    secret = command_trigger(api, "import sys; print('boom'); sys.exit(3)", max_attempts=3)
    run_id = deliver(api, secret, b"{}", trigger="cmd").json()["id"]
    run = wait_run(api, run_id)
    assert run["status"] == "failed" and run["attempt"] == 3 and run["exitCode"] == 3
    assert "boom" in run["output"] and run["finishedAt"] is not None
    summary = api.get(agent_url(AGENT, "/memory")).json()
    assert summary["failedRunCount"] == 1 and summary["pendingRunCount"] == 0
    assert summary["lastCheckedAt"] is not None
    retried = api.post(agent_url(AGENT, f"/runs/{run_id}:retry"))
    assert retried.status_code == 202 and retried.json()["status"] == "queued"
    again = wait_run(api, run_id)
    assert again["status"] == "failed" and again["attempt"] == 4
    # a run that is not failed can't be retried
    ok_secret = add_trigger(api, "ok")["secret"]
    ok_run = deliver(api, ok_secret, b"{}", trigger="ok").json()["id"]
    wait_run(api, ok_run)
    assert_error(api.post(agent_url(AGENT, f"/runs/{ok_run}:retry")), 409, "conflict")


def test_timeout_kills_the_whole_process_group(api: Api, shared: Path) -> None:
    marker = shared / "grandchild-alive"
    inner = f"import time; time.sleep(3); open({str(marker)!r}, 'w').write('x')"
    script = (
        "import subprocess, sys, time; "
        f"subprocess.Popen([sys.executable, '-c', {inner!r}]); "
        "time.sleep(60)"
    )
    secret = command_trigger(api, script, timeoutSeconds=1, max_attempts=1)
    run = wait_run(api, deliver(api, secret, b"{}", trigger="cmd").json()["id"])
    assert run["status"] == "failed" and "timed out" in run["error"]
    time.sleep(3.5)
    assert not marker.exists(), "a process of the timed-out group survived"


def test_runs_listing_filters_and_pages(api: Api) -> None:
    secret = add_trigger(api)["secret"]
    ids = [deliver(api, secret, b"{}", webhook_id=f"m{i}").json()["id"] for i in range(5)]
    for run_id in ids:
        wait_run(api, run_id)
    pages = api.walk(agent_url(AGENT, "/runs"), "runs", {"limit": "2", "triggerId": "gh"})
    assert [r["id"] for p in pages for r in p["runs"]] == ids
    assert api.get(agent_url(AGENT, "/runs"), params={"status": "failed"}).json()["runs"] == []
    assert_error(
        api.get(agent_url(AGENT, "/runs"), params={"status": "odd"}),
        400,
        "invalid_request",
        "status",
    )
    assert_error(api.get(agent_url(AGENT, "/runs/run_doesnotexist")), 404, "not_found")


def test_summary_states_follow_runs(api: Api) -> None:
    assert api.get(agent_url(AGENT, "/memory")).json()["state"] == "waiting"
    secret = command_trigger(api, "import time; time.sleep(1.5)")
    run_id = deliver(api, secret, b"{}", trigger="cmd").json()["id"]
    wait_run(api, run_id, until=("running",))
    summary = api.get(agent_url(AGENT, "/memory")).json()
    assert summary["state"] == "updating" and summary["pendingRunCount"] == 1
    wait_run(api, run_id)
    assert api.get(agent_url(AGENT, "/memory")).json()["state"] == "idle"


def test_audit_log_shows_the_next_retry_as_rfc3339(api: Api) -> None:
    # A command that fails is retried, so the log holds a retry step with nextRetryAt.
    secret = command_trigger(api, "import sys; sys.exit(3)", max_attempts=2)
    run = wait_run(api, deliver(api, secret, b"{}", trigger="cmd").json()["id"])
    assert run["status"] == "failed" and run["attempt"] == 2
    steps = api.post(agent_url(AGENT, "/memory:inspect"), json={"log": {}}).json()["log"]["steps"]
    retries = [s["detail"]["nextRetryAt"] for s in steps if "nextRetryAt" in s["detail"]]
    assert retries, steps
    for value in retries:
        if value is not None:
            assert isinstance(value, str) and value.endswith("Z"), retries
            dt.datetime.fromisoformat(value)
    assert any(isinstance(v, str) for v in retries)


# ---- deliveries are never accepted to fail ------------------------------------------


def test_a_body_a_memory_action_cannot_store_is_413_before_any_run(api: Api) -> None:
    secret = add_trigger(api, prompt="store it")["secret"]
    big = json.dumps({"blob": "y" * 200 * 1024}).encode()  # 200 KiB: under webhookBodyBytes
    refused = deliver(api, secret, big, webhook_id="msg_big")
    assert_error(refused, 413, "payload_too_large", field="body")
    assert "memory action" in refused.json()["message"]
    # Just under memoryBytes, the frontmatter would push the memory over it: refused too.
    near = json.dumps({"blob": "y" * (100 * 1024 - 20)}).encode()
    assert deliver(api, secret, near, webhook_id="msg_near").status_code == 413
    assert api.get(agent_url(AGENT, "/runs")).json()["runs"] == []
    # A body that fits is stored, once.
    fits = deliver(api, secret, b'{"ok": true}', webhook_id="msg_ok")
    assert fits.status_code == 202
    assert wait_run(api, fits.json()["id"])["status"] == "succeeded"


def test_a_permanent_error_fails_the_run_at_once_without_retrying(api: Api) -> None:
    # A memory stands where the action needs a folder: every attempt would meet it.
    api.must_write("/memories/inbox", "a memory, not a folder")
    secret = add_trigger(api, prompt="p", maxAttempts=5)["secret"]
    run = deliver(api, secret, b"{}", webhook_id="msg_x").json()
    ended = wait_run(api, run["id"])
    assert ended["status"] == "failed"
    assert ended["attempt"] == 1 and ended["nextRetryAt"] is None
    assert "not retried" in ended["error"]
