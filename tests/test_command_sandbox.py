"""Command actions: an operator feature, admin-only, run in a sandbox.

- disabled by default: creating or changing a command trigger is 403 naming
  MEMFS_ALLOW_COMMANDS, and a command trigger written by the local CLI is not executed;
- enabled, only the admin key may create, change, rotate or delete one: a scoped key
  with every scope gets 403 and nothing is written;
- a real ``memfs serve`` (run as root in CI) runs the child as MEMFS_RUN_USER: the
  child's environment holds only the documented variables, ``cat /proc/$PPID/environ``
  shows no secret, its uid is not 0, and it can't read the data folder;
- a worker that adopts the claim of a killed server kills the process group the dead
  attempt left behind (its forked grandchild), recorded with the claim;
- the server is non-dumpable; when not root, ``memfs serve`` warns that commands share
  its uid.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from commands import child_python, shared_folder
from http_fixtures import AGENT, Api, agent_url, assert_error, open_api
from memfs.canonical import layout
from memfs.core import sandbox
from memfs.domain.webhook_verify import sign
from servers_real import ADMIN_KEY, RealServer, memfs_cli

COMMAND = {"type": "command", "argv": ["sh", "-c", "true"], "timeoutSeconds": 5}
ALL_SCOPES = [
    "memories:read",
    "memories:write",
    "inspect",
    "triggers:write",
    "runs:read",
    "agents:*",
]


def trigger_files(data: Path) -> list[Path]:
    folder = layout.agent_folder(data, AGENT) / ".memfs" / "triggers"
    return sorted(folder.rglob("*.json")) if folder.exists() else []


@pytest.fixture
def enabled(tmp_path: Path) -> Iterator[Api]:
    with open_api(tmp_path, allow_commands=True) as opened:
        opened.create_agent()
        yield opened


def test_disabled_by_default_even_for_the_admin(tmp_path: Path) -> None:
    with open_api(tmp_path) as api:
        api.create_agent()
        refused = api.put(agent_url(AGENT, "/triggers/cmd"), json={"action": COMMAND})
        assert_error(refused, 403, "forbidden", "action")
        assert "MEMFS_ALLOW_COMMANDS" in refused.json()["message"]
        assert trigger_files(api.data) == []
        # a memory trigger can't be turned into a command one either
        assert api.put(agent_url(AGENT, "/triggers/t"), json={}).status_code == 201
        files = trigger_files(api.data)
        refused = api.put(agent_url(AGENT, "/triggers/t"), json={"action": COMMAND})
        assert_error(refused, 403, "forbidden", "action")
        assert trigger_files(api.data) == files


def test_only_the_admin_key_may_create_or_change_a_command_trigger(enabled: Api) -> None:
    api = enabled
    scoped = api.make_key("ops", ALL_SCOPES)
    refused = api.put(agent_url(AGENT, "/triggers/cmd"), json={"action": COMMAND}, auth=scoped)
    assert_error(refused, 403, "forbidden", "Authorization")
    assert trigger_files(api.data) == []
    # the admin's command trigger: the scoped key can't change, re-secret or delete it
    made = api.put(agent_url(AGENT, "/triggers/cmd"), json={"action": COMMAND})
    assert made.status_code == 201, made.text
    files = trigger_files(api.data)
    for response in (
        api.put(agent_url(AGENT, "/triggers/cmd"), json={"prompt": "x"}, auth=scoped),
        api.put(
            agent_url(AGENT, "/triggers/cmd"),
            json={"secret": "whsec_" + "A" * 43 + "="},
            auth=scoped,
        ),
        api.post(agent_url(AGENT, "/triggers/cmd:rotateSecret"), auth=scoped),
        api.delete(agent_url(AGENT, "/triggers/cmd"), auth=scoped),
    ):
        assert_error(response, 403, "forbidden")
    assert trigger_files(api.data) == files
    # a narrowed admin key is not the admin either
    narrowed = api.put(
        agent_url(AGENT, "/triggers/cmd2"),
        json={"action": COMMAND},
        headers={"Memfs-Subject": "alice", "Memfs-Scopes": "triggers:write agents:*"},
    )
    assert_error(narrowed, 403, "forbidden")
    # memory triggers stay open to the scoped key
    ok = api.put(agent_url(AGENT, "/triggers/mem"), json={}, auth=scoped)
    assert ok.status_code == 201, ok.text


def deliver(client: httpx.Client, secret: str, trigger: str, webhook_id: str) -> httpx.Response:
    stamp = int(time.time())
    body = b'{"hello": 1}'
    return client.post(
        f"/v1/agents/{quote(AGENT, safe='')}/triggers/{trigger}:deliver",
        content=body,
        headers={
            "webhook-id": webhook_id,
            "webhook-timestamp": str(stamp),
            "webhook-signature": sign(secret, webhook_id, stamp, body),
            "content-type": "application/json",
        },
    )


def wait_run(client: httpx.Client, run_id: str, timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        run: dict[str, Any] = client.get(f"/v1/agents/{quote(AGENT, safe='')}/runs/{run_id}").json()
        if run["status"] in ("succeeded", "failed"):
            return run
        assert time.monotonic() < deadline, f"run did not end: {run}"
        time.sleep(0.05)


def test_a_server_without_the_setting_never_executes_a_command(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with shared_folder() as shared:
        marker = shared / "ran"
        assert memfs_cli("agents", "create", AGENT, data=data).returncode == 0
        # The local CLI is the operator: it may write a command trigger ...
        added = subprocess.run(
            [sys.executable, "-m", "memfs.cli", "--data", str(data), "--json", "triggers", "add",
             AGENT, "cmd", "--command", "touch", str(marker)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert added.returncode == 0, added.stderr
        secret = json.loads(added.stdout)["secret"]
        # ... but a server started without MEMFS_ALLOW_COMMANDS refuses to run it.
        with RealServer(data) as srv, srv.client() as client:
            response = deliver(client, secret, "cmd", "evt_1")
            assert response.status_code == 202, response.text
            run = wait_run(client, response.json()["id"])
        assert run["status"] == "failed" and "MEMFS_ALLOW_COMMANDS" in run["error"], run
        assert not marker.exists()


SPY = r"""
import json, os, sys
report = {
    "env": dict(os.environ),
    "uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
    "home": os.environ.get("HOME"), "cwd": os.getcwd(),
}
try:
    report["parent_environ"] = open(f"/proc/{os.getppid()}/environ", "rb").read().decode("latin-1")
except OSError as exc:
    report["parent_environ_error"] = exc.strerror
for name in ("data", "admin_key", "token_key", "index"):
    path = sys.argv[1 + ("data", "admin_key", "token_key", "index").index(name)]
    try:
        if os.path.isdir(path):
            report[name] = os.listdir(path)
        else:
            report[name] = open(path, "rb").read().decode("latin-1")
    except OSError as exc:
        report[name + "_error"] = exc.strerror
import subprocess
report["shell"] = subprocess.run(
    ["sh", "-c", "env; cat /proc/$PPID/environ"], capture_output=True, text=True
).stdout
import resource
report["limits"] = {n: resource.getrlimit(getattr(resource, n))[0]
                    for n in ("RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NOFILE")}
json.dump(report, open(os.path.join(sys.argv[5], "report.json"), "w"))
"""


def test_a_command_child_sees_no_secret_and_cannot_read_the_data_folder(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with shared_folder() as shared, RealServer(data, extra_args=("--allow-commands",)) as srv:
        data_abs = data.resolve()
        argv = [
            child_python(),
            "-c",
            SPY,
            str(data_abs),
            str(data_abs / "admin.key"),
            str(data_abs / "token.key"),
            str(data_abs / "index.sqlite"),
            str(shared),
        ]
        with srv.client() as client:
            assert client.put(agent_url(AGENT), json={}).status_code == 201
            made = client.put(
                agent_url(AGENT, "/triggers/spy"),
                json={"action": {"type": "command", "argv": argv, "timeoutSeconds": 60}},
            )
            assert made.status_code == 201, made.text
            secret = made.json()["secret"]
            response = deliver(client, secret, "spy", "evt_1")
            run = wait_run(client, response.json()["id"])
        assert run["status"] == "succeeded", (run["error"], run["output"])
        report = json.loads((shared / "report.json").read_text())
        token_key = (data / "token.key").read_bytes().decode()
    env = report["env"]
    allowed = {"PATH", "LANG", "HOME", "LC_CTYPE"} | {
        "MEMFS_URL", "MEMFS_TOKEN", "MEMFS_AGENT_ID", "MEMFS_RUN_ID", "MEMFS_TRIGGER_ID",
        "MEMFS_WEBHOOK_ID", "MEMFS_PROMPT", "MEMFS_CONTENT_TYPE", "MEMFS_ATTEMPT",
        "MEMFS_BODY_FILE",
    }  # fmt: skip
    assert set(env) <= allowed, sorted(set(env) - allowed)
    assert env["HOME"] == report["cwd"] and not report["cwd"].startswith(str(data_abs))
    everything = json.dumps(report)
    for secret_text in (ADMIN_KEY, token_key, secret, "MEMFS_ADMIN_KEY", "MEMFS_DATA"):
        assert secret_text not in everything, secret_text
    assert "parent_environ" not in report  # /proc/$PPID/environ is unreadable
    limits = report["limits"]
    assert limits["RLIMIT_CPU"] == 60 + sandbox.CPU_SLACK_SECONDS
    assert limits["RLIMIT_FSIZE"] == sandbox.FILE_BYTES
    assert limits["RLIMIT_NOFILE"] == sandbox.OPEN_FILES
    if os.geteuid() == 0:  # as in CI: the child runs as the unprivileged run user
        assert report["uid"] != 0 and report["gid"] != 0 and 0 not in report["groups"]
        for name in ("data", "admin_key", "token_key", "index"):
            assert name not in report and report[name + "_error"] == "Permission denied", name


GRANDCHILD = r"""
import os, subprocess, sys, time
shared = sys.argv[1]
if os.environ["MEMFS_ATTEMPT"] == "1":
    # a forked grandchild: in the attempt's process group, but not killed by PDEATHSIG
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    with open(os.path.join(shared, "grandchild"), "w") as out:
        out.write(str(child.pid))
    time.sleep(600)
"""


def test_adopting_a_dead_attempt_kills_the_process_group_it_left(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with shared_folder() as shared:
        srv = RealServer(data, extra_args=("--allow-commands", "--retry-base-ms", "50"))
        with srv:
            argv = [child_python(), "-c", GRANDCHILD, str(shared)]
            with srv.client() as client:
                assert client.put(agent_url(AGENT), json={}).status_code == 201
                made = client.put(
                    agent_url(AGENT, "/triggers/cmd"),
                    json={"action": {"type": "command", "argv": argv, "timeoutSeconds": 600}},
                )
                secret = made.json()["secret"]
                run_id = deliver(client, secret, "cmd", "evt_1").json()["id"]
            marker = shared / "grandchild"
            deadline = time.monotonic() + 60
            while not (marker.exists() and marker.read_text()):
                assert time.monotonic() < deadline, srv.log_text()
                time.sleep(0.05)
            grandchild = int(marker.read_text())
            srv.kill_hard()
            assert alive(grandchild), "the premise failed: PDEATHSIG took the grandchild"
            srv.start()
            with srv.client() as client:
                run = wait_run(client, run_id)
            assert run["status"] == "succeeded" and run["attempt"] == 2, run
            deadline = time.monotonic() + 30
            while alive(grandchild):
                assert time.monotonic() < deadline, "the dead attempt's group kept running"
                time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_the_server_makes_itself_non_dumpable(tmp_path: Path) -> None:
    probe = (
        "from memfs.core import sandbox; before = sandbox.is_dumpable(); "
        "sandbox.harden_server(); print(before, sandbox.is_dumpable())"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "False"]


def test_serve_warns_when_commands_share_its_uid(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    warning = sandbox.start_warning(True, "nobody")
    assert warning is not None and "own user" in warning and "dedicated user" in warning
    assert sandbox.start_warning(False, "nobody") is None
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert "does not exist" in (sandbox.start_warning(True, "no-such-user-x") or "")
