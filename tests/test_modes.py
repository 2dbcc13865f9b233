"""Modes: the data folder and every folder in it are 0700, every file 0600.

After a realistic session — a real server (HTTP writes, keys, a trigger and a
delivery stored as a memory), then the CLI (put, hand edit + commit, fsck), and the
generated admin.key — no file or folder under the data folder grants anything to the
group or others: trigger records (plaintext whsec_ secrets), keys, log entries, blobs,
the working tree, the index and its WAL/SHM, token.key.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from urllib.parse import quote

from http_fixtures import agent_url, memory_url
from memfs.canonical import layout
from memfs.core.keys import admin_key
from memfs.domain.webhook_verify import sign
from servers_real import RealServer, memfs_cli

AGENT = "users/alice/assistant"


def loose_modes(data: Path) -> list[str]:
    wrong = []
    for dirpath, dirnames, filenames in os.walk(data):
        for name in dirnames:
            mode = stat.S_IMODE(os.lstat(os.path.join(dirpath, name)).st_mode)
            if mode != 0o700:
                wrong.append(f"{os.path.join(dirpath, name)} {mode:o}")
        for name in filenames:
            mode = stat.S_IMODE(os.lstat(os.path.join(dirpath, name)).st_mode)
            if mode != 0o600:
                wrong.append(f"{os.path.join(dirpath, name)} {mode:o}")
    return wrong


def test_every_file_is_0600_and_every_folder_0700_after_a_session(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)  # as an older memfs, or a careless mkdir, left it
    os.chmod(data, 0o755)
    with RealServer(data) as srv, srv.client() as client:
        md = {"Content-Type": "text/markdown"}
        assert client.put(agent_url(AGENT), json={}).status_code == 201
        for i in range(2):
            body = (f"note {i}\n" + "y" * 3000 * i).encode()
            response = client.put(
                memory_url("/memories/deep/er/a.md", AGENT), content=body, headers=md
            )
            assert response.status_code in (200, 201)
        made = client.put("/v1/tenant/keys/app", json={"scopes": ["memories:read"]})
        assert made.status_code == 201
        secret = client.put(agent_url(AGENT, "/triggers/gh"), json={}).json()["secret"]
        stamp, body = int(time.time()), b'{"x": 1}'
        delivered = client.post(
            f"/v1/agents/{quote(AGENT, safe='')}/triggers/gh:deliver",
            content=body,
            headers={
                "webhook-id": "evt:1",
                "webhook-timestamp": str(stamp),
                "webhook-signature": sign(secret, "evt:1", stamp, body),
            },
        )
        assert delivered.status_code == 202
        run_url = agent_url(AGENT, f"/runs/{delivered.json()['id']}")
        deadline = time.monotonic() + 60
        while client.get(run_url).json()["status"] != "succeeded":
            assert time.monotonic() < deadline
            time.sleep(0.05)
    source = tmp_path / "in.md"
    source.write_text("from the cli\n")
    assert memfs_cli("put", AGENT, "/memories/cli/b.md", str(source), data=data).returncode == 0
    hand = layout.worktree_root(data, AGENT) / "hand.md"
    hand.write_text("a hand edit\n")
    os.chmod(hand, 0o600)  # a person's own file: commit must not loosen anything either
    assert memfs_cli("commit", AGENT, "-m", "hand", data=data).returncode == 0
    assert memfs_cli("fsck", "--repair", data=data).returncode == 0
    admin_key(data, None)  # as `memfs serve` without MEMFS_ADMIN_KEY
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    names = {p.name for p in data.rglob("*")}
    for expected in ("admin.key", "token.key", "index.sqlite", "app.json", "hand.md"):
        assert expected in names, expected
    assert loose_modes(data) == []
