"""Erasure: after ``DELETE /v1/agents/{id}`` returns, no byte of the agent's memory
content (current or past versions) is left anywhere under the data folder.

The raw bytes of every file are searched for a unique marker written in several
versions (created, modified, deleted, renamed, a delivery stored as a memory): in the
SQLite main file, its WAL and free pages, and the object files. Another agent's
marker, still present, proves the search would find one. Run in-process and against
a real ``memfs serve`` that keeps running.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from http_fixtures import agent_url, memory_url, open_api
from memfs.domain.webhook_verify import sign
from servers_real import RealServer

ERASED = "users/alice/assistant"
KEPT = "users/bob/assistant"


def files_holding(data: Path, marker: bytes) -> list[str]:
    found = []
    for dirpath, _dirs, names in os.walk(data):
        for name in names:
            path = Path(dirpath) / name
            try:
                if marker in path.read_bytes():
                    found.append(str(path.relative_to(data)))
            except FileNotFoundError:
                continue
    return sorted(found)


Call = Callable[..., Any]


def session(call: Call, agent: str, marker: str) -> None:
    """Write ``marker`` into several versions of several memories of ``agent``."""
    md = {"Content-Type": "text/markdown"}
    assert call("PUT", agent_url(agent), json={}).status_code == 201
    for i in range(3):
        text = f"---\ndescription: {marker} v{i}\n---\n{marker} body {i}\n" + "x" * 5000 * i
        response = call(
            "PUT", memory_url("/memories/a.md", agent), content=text.encode(), headers=md
        )
        assert response.status_code in (200, 201), response.text
    big = (marker + "\n") * 2000  # large enough for a blob file and overflow pages
    assert (
        call(
            "PUT", memory_url("/memories/big.md", agent), content=big.encode(), headers=md
        ).status_code
        == 201
    )
    # A link whose target names the marker: inspect's links table holds that path.
    text = f"{marker} tool, see [[{marker}-target]]"
    command = {"command": "create", "path": "/memories/tool.md", "file_text": text}
    assert call("POST", agent_url(agent, "/memory:command"), json=command).json()["ok"]
    rename = {"command": "rename", "old_path": "/memories/tool.md", "new_path": "/memories/t2.md"}
    assert call("POST", agent_url(agent, "/memory:command"), json=rename).json()["ok"]
    assert call("DELETE", memory_url("/memories/big.md", agent)).status_code == 204


def test_erase_leaves_no_byte_of_the_agent_in_process(tmp_path: Path) -> None:
    gone, kept = f"erase-me-{secrets.token_hex(8)}", f"keep-me-{secrets.token_hex(8)}"
    with open_api(tmp_path) as api:
        session(api.call, KEPT, kept)
        session(api.call, ERASED, gone)
        # Into the main file first: its deleted rows and freed pages must be wiped too.
        api.app.services.store.index.checkpoint()
        assert "index.sqlite" in files_holding(api.data, gone.encode())
        response = api.delete(agent_url(ERASED))
        assert response.status_code == 204, response.text
        assert files_holding(api.data, gone.encode()) == []
        assert files_holding(api.data, kept.encode())  # the search does find text
        assert api.get(memory_url("/memories/a.md", KEPT)).status_code == 200


def test_erase_leaves_no_byte_of_the_agent_with_a_running_server(tmp_path: Path) -> None:
    data = tmp_path / "data"
    gone, kept = f"erase-me-{secrets.token_hex(8)}", f"keep-me-{secrets.token_hex(8)}"
    with RealServer(data) as srv, srv.client() as client:

        def call(method: str, url: str, **kwargs: Any) -> Any:
            return client.request(method, url, **kwargs)

        session(call, KEPT, kept)
        session(call, ERASED, gone)
        # a delivery stored as a memory, and its run
        secret = client.put(agent_url(ERASED, "/triggers/gh"), json={}).json()["secret"]
        stamp = int(time.time())
        body = f'{{"text": "{gone} delivered"}}'.encode()
        delivered = client.post(
            f"/v1/agents/{quote(ERASED, safe='')}/triggers/gh:deliver",
            content=body,
            headers={
                "webhook-id": "evt_1",
                "webhook-timestamp": str(stamp),
                "webhook-signature": sign(secret, "evt_1", stamp, body),
            },
        )
        assert delivered.status_code == 202, delivered.text
        run_url = agent_url(ERASED, f"/runs/{delivered.json()['id']}")
        deadline = time.monotonic() + 60
        while client.get(run_url).json()["status"] != "succeeded":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert files_holding(data, gone.encode())
        response = client.delete(agent_url(ERASED))
        assert response.status_code == 204, response.text
        # the server keeps running, its connections open: nothing is left anyway
        assert files_holding(data, gone.encode()) == []
        assert files_holding(data, kept.encode())
        assert client.get(memory_url("/memories/a.md", KEPT)).status_code == 200
