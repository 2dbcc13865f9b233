"""Names memfs makes from what clients send: no .git segment, no collision.

- a memory path segment ``.git`` in any case, with trailing dots or spaces, or its
  8.3 short name ``git~1`` is refused with 400 on every edge (PUT, memory:command,
  a trigger's action.path, the CLI);
- an old history that holds one still exports with ``--format git``: the path is
  skipped and named on stderr, and the working tree never gets a ``.git`` folder;
- webhook ids (and trigger ids) map to memory paths injectively: ``evt:1`` and
  ``evt_1`` are two memories, as are ids that differ only past 200 bytes.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from http_fixtures import AGENT, Api, agent_url, assert_error, memory_url, open_api, settings
from memfs.canonical import layout
from memfs.core.runner import memory_path
from memfs.core.store import Store
from memfs.core.triggers import DEFAULT_PATH, Trigger
from memfs.domain import paths
from memfs.domain.commits import format_ts, parse_ts
from memfs.domain.webhook_verify import sign
from memfs.errors import InvalidRequest
from memfs.http.app import build

GIT_NAMES = [".git", ".GIT", ".Git.", ".git ", ".git. .", "git~1", "GIT~1", "git~1."]


@pytest.mark.parametrize("name", GIT_NAMES)
def test_git_segments_are_refused_in_any_spelling(name: str) -> None:
    for path in (f"/memories/{name}/config", f"/memories/a/{name}", f"/memories/{name}"):
        with pytest.raises(InvalidRequest, match=r"\.git"):
            paths.memory_path(path)


def test_names_that_only_look_like_git_are_fine() -> None:
    for name in (".gitignore", "git", ".git2", "x.git", "git~2", ".gitkeep"):
        assert paths.memory_path(f"/memories/{name}") == f"/memories/{name}"


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with open_api(tmp_path) as opened:
        opened.create_agent()
        yield opened


def test_every_edge_refuses_a_git_segment(api: Api, tmp_path: Path) -> None:
    for path in ("/memories/.git/config", "/memories/notes/.GIT./HEAD", "/memories/GIT~1/x"):
        response = api.write(path, b"[core]\nfsmonitor = touch /tmp/pwned\n")
        assert_error(response, 400, "invalid_request", "path")
    command = {"command": "create", "path": "/memories/.git/config", "file_text": "x"}
    result = api.post(agent_url(AGENT, "/memory:command"), json=command).json()
    # Worded like the SDK tool's own path refusals ("The path P ..."), naming the rule.
    assert result["ok"] is False and result["result"].startswith("The path /memories/.git/config")
    assert ".git is reserved" in result["result"]
    api.must_write("/memories/ok.md", "ok\n")
    rename = {"command": "rename", "old_path": "/memories/ok.md", "new_path": "/memories/.git/HEAD"}
    result = api.post(agent_url(AGENT, "/memory:command"), json=rename).json()
    assert result["ok"] is False and ".git is reserved" in result["result"]
    trigger = api.put(
        agent_url(AGENT, "/triggers/t"),
        json={"action": {"type": "memory", "path": "/memories/.git/{webhookId}"}},
    )
    assert_error(trigger, 400, "invalid_request", "action.path")
    tree = layout.worktree_root(api.data, AGENT)
    assert not any(p.name.lower().startswith((".git", "git~")) for p in tree.rglob("*"))
    assert api.get(memory_url("/memories/ok.md")).status_code == 200


def test_git_export_of_an_old_history_with_a_git_path_skips_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = Store(data)
    store.create_agent(AGENT)
    store.write(AGENT, "/memories/ok.md", b"ok\n", actor="test")
    # Revision 2 as an older memfs wrote it: a change of /memories/.git/config.
    first = json.loads(store.backend.get(layout.log_key(AGENT, 1)))
    change = dict(first["changes"][0])
    evil = "[core]\n\tfsmonitor = touch pwned\n"
    change.update(
        path="/memories/.git/config",
        content=evil,
        after=hashlib.sha256(evil.encode()).hexdigest(),
        bytes=len(evil),
    )
    entry = {**first, "revision": 2, "changes": [change], "message": "old"}
    entry["ts"] = format_ts(parse_ts(first["ts"]) + 1)
    assert store.backend.put_if_absent(layout.log_key(AGENT, 2), json.dumps(entry).encode() + b"\n")
    store.sync(AGENT)  # applied to the index, never to the working tree
    store.close()
    assert not (layout.worktree_root(data, AGENT) / ".git").exists()
    exported = subprocess.run(
        [
            sys.executable,
            "-m",
            "memfs.cli",
            "--data",
            str(data),
            "export",
            AGENT,
            "--format",
            "git",
        ],
        capture_output=True,
        check=False,
    )
    assert exported.returncode == 0, exported.stderr.decode()
    assert b"/memories/.git/config" in exported.stderr and b"skipped" in exported.stderr
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    imported = subprocess.run(
        ["git", "fast-import", "--quiet"], cwd=repo, input=exported.stdout, capture_output=True
    )
    assert imported.returncode == 0, imported.stderr.decode()
    files = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", "refs/heads/main"],
        cwd=repo, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert files == ["memories/ok.md"]


def _trigger(path: str = DEFAULT_PATH, trigger_id: str = "gh") -> Trigger:
    return Trigger(AGENT, trigger_id, 1, "", {"type": "memory", "path": path}, 5, (), 0, 0)


COLLIDING = [
    ("evt:1", "evt_1"),
    ("a/b", "a_b"),
    ("x~1", "x%7E1"),
    ("x%41", "xA"),
    ("..", "__"),
    (".git", "_git"),
    ("e" * 250 + "1", "e" * 250 + "2"),
    ("é", "_"),
]


@pytest.mark.parametrize(("one", "other"), COLLIDING)
def test_webhook_ids_map_to_distinct_memory_paths(one: str, other: str) -> None:
    a, b = memory_path(_trigger(), one), memory_path(_trigger(), other)
    assert a != b
    for path in (a, b):
        assert paths.memory_path(path) == path  # a valid path, with no .git or dot segment
    # without a suffix in the template, too
    bare = _trigger("/memories/in/{triggerId}/{webhookId}")
    assert memory_path(bare, one) != memory_path(bare, other)


def test_colliding_webhook_ids_are_two_memories_end_to_end(tmp_path: Path) -> None:
    app = build(settings(tmp_path))
    with TestClient(app) as client:
        api = Api(client, app, tmp_path / "data")
        api.create_agent()
        secret = api.put(agent_url(AGENT, "/triggers/gh"), json={}).json()["secret"]
        run_ids = []
        for webhook_id in ("evt:1", "evt_1"):
            stamp, body = int(time.time()), f'{{"id": "{webhook_id}"}}'.encode()
            response = api.post(
                agent_url(AGENT, "/triggers/gh:deliver"),
                content=body,
                auth=None,
                protocol=None,
                headers={
                    "webhook-id": webhook_id,
                    "webhook-timestamp": str(stamp),
                    "webhook-signature": sign(secret, webhook_id, stamp, body),
                },
            )
            assert response.status_code == 202, response.text
            run_ids.append(response.json()["id"])
        deadline = time.monotonic() + 30
        for run_id in run_ids:
            while api.get(agent_url(AGENT, f"/runs/{run_id}")).json()["status"] != "succeeded":
                assert time.monotonic() < deadline
                time.sleep(0.05)
        listed = api.get(agent_url(AGENT, "/memories")).json()["memories"]
        assert len(listed) == 2, listed
        bodies = sorted(
            api.get(memory_url(m["path"])).json()["content"].split("\n")[-1] for m in listed
        )
        assert bodies == ['{"id": "evt:1"}', '{"id": "evt_1"}']
