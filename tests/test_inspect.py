"""``memory:inspect`` through the in-process app: sections, paging, pinning, refusals.

Every request goes through the real ASGI app (Starlette's TestClient, no lifespan:
runs are driven by hand where a test needs them). Stores are filled through the
HTTP API where the test is about what a client did, and through ``Store.apply``
where only the amount of history matters.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import subprocess
import sys
import threading
import time
import types
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from starlette.testclient import TestClient

import memfs.core.tokens
from memfs.config import Settings
from memfs.core.runner import Runner
from memfs.core.store import Put, Store
from memfs.domain.commits import format_ts, now_us, parse_ts
from memfs.domain.webhook_verify import sign
from memfs.http.app import MemfsApp, build

ADMIN_KEY = "test-admin-key-123456"
AGENT = "users/alice"
TOKENS = ("nextChunkToken", "nextNodeToken", "nextEdgeToken", "nextLogToken")
CHUNK_KEYS = {
    "agentId",
    "path",
    "version",
    "chunkIndex",
    "byteStart",
    "byteEnd",
    "heading",
    "content",
    "contentSha256",
    "validFrom",
    "validTo",
    "superseded",
    "truncated",
}
ALL = {"vectors": {}, "graph": {}, "log": {}}


def enc(value: str) -> str:
    return quote(value, safe="")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Api:
    """A client on one in-process app, admin key and protocol header by default."""

    def __init__(self, data: Path) -> None:
        self.data = data
        self.app: MemfsApp = build(Settings(data=data, admin_key=ADMIN_KEY))
        self.client = TestClient(self.app)  # not entered: no lifespan, no runner

    @property
    def store(self) -> Store:
        return self.app.services.store

    def call(self, method: str, url: str, *, key: str = ADMIN_KEY, **kw: Any) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}", "Memfs-Protocol": "1"}
        headers.update(kw.pop("headers", {}))
        return self.client.request(method, url, headers=headers, **kw)

    def agent(self, agent_id: str) -> None:
        response = self.call("PUT", f"/v1/agents/{enc(agent_id)}", json={})
        assert response.status_code == 201, response.text

    def write(self, path: str, content: bytes | str, agent_id: str = AGENT, msg: str = "") -> Any:
        data = content.encode() if isinstance(content, str) else content
        url = f"/v1/agents/{enc(agent_id)}/memories/{path.removeprefix('/memories/')}"
        headers = {"Content-Type": "text/markdown", "Memfs-Message": msg}
        response = self.call("PUT", url, content=data, headers=headers)
        assert response.status_code in (200, 201), response.text
        return response.json()

    def delete(self, path: str, agent_id: str = AGENT) -> None:
        url = f"/v1/agents/{enc(agent_id)}/memories/{path.removeprefix('/memories/')}"
        assert self.call("DELETE", url).status_code == 204

    def raw(self, path: str, version: int, agent_id: str = AGENT) -> bytes:
        url = f"/v1/agents/{enc(agent_id)}/memories/{path.removeprefix('/memories/')}"
        response = self.call(
            "GET", url, params={"version": version}, headers={"Accept": "text/markdown"}
        )
        assert response.status_code == 200, response.text
        return response.content

    def versions(self, path: str, agent_id: str = AGENT) -> list[dict[str, Any]]:
        response = self.call("GET", f"/v1/agents/{enc(agent_id)}/versions", params={"path": path})
        assert response.status_code == 200, response.text
        rows: list[dict[str, Any]] = response.json()["versions"]
        return rows

    def inspect_raw(
        self, body: Any, *, agent_id: str = AGENT, scope: str | None = None, key: str = ADMIN_KEY
    ) -> httpx.Response:
        url = (
            f"/v1/scopes/{enc(scope)}/memory:inspect"
            if scope is not None
            else f"/v1/agents/{enc(agent_id)}/memory:inspect"
        )
        return self.call("POST", url, json=body, key=key)

    def inspect(self, body: Any, **kw: Any) -> dict[str, Any]:
        response = self.inspect_raw(body, **kw)
        assert response.status_code == 200, response.text
        doc: dict[str, Any] = response.json()
        return doc

    def walk(
        self, limits: dict[str, int], *, as_of: str | None = None, **kw: Any
    ) -> tuple[dict[str, list[dict[str, Any]]], str, int]:
        """Every item of every listing (limits per listing), pinned at the first
        readTimestamp; (items by listing, readTimestamp, requests made)."""
        tokens: dict[str, str] = {}
        out: dict[str, list[dict[str, Any]]] = {name: [] for name in limits}
        done: set[str] = set()
        pin = as_of
        requests = 0
        while True:
            body: dict[str, Any] = {}
            if "chunks" in limits and "chunks" not in done:
                body["vectors"] = {"limit": limits["chunks"], "pageToken": tokens.get("chunks")}
            graph = [g for g in ("nodes", "edges") if g in limits and g not in done]
            if graph:
                body["graph"] = {
                    "nodeLimit": limits.get("nodes", 1),
                    "edgeLimit": limits.get("edges", 1),
                    "nodePageToken": tokens.get("nodes"),
                    "edgePageToken": tokens.get("edges"),
                }
            if "log" in limits and "log" not in done:
                body["log"] = {"limit": limits["log"], "pageToken": tokens.get("log")}
            if not body:
                assert pin is not None
                return out, pin, requests
            if pin is not None:
                body["asOf"] = pin
            page = self.inspect(body, **kw)
            requests += 1
            assert requests < 10_000
            pin = pin or page["readTimestamp"]
            assert page["readTimestamp"] == pin  # every page of a walk is at its pin
            found = {
                "chunks": page.get("vectors", {}).get("chunks"),
                "nodes": page.get("graph", {}).get("nodes"),
                "edges": page.get("graph", {}).get("edges"),
                "log": page.get("log", {}).get("steps"),
            }
            names = {"chunks": TOKENS[0], "nodes": TOKENS[1], "edges": TOKENS[2], "log": TOKENS[3]}
            for listing in limits:
                if listing in done:
                    continue
                items = found[listing]
                assert items is not None
                assert len(items) <= limits[listing]
                out[listing].extend(items)
                token = page[names[listing]]
                if token == "":
                    done.add(listing)
                else:
                    # a token only when a full page was returned (never an empty next page)
                    assert len(items) == limits[listing], (listing, len(items))
                    tokens[listing] = token


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    opened = Api(tmp_path / "data")
    try:
        yield opened
    finally:
        opened.client.close()
        opened.store.close()


# ---- a module-wide store with more history than any maximum page -------------------

BIG_COMMITS = 210  # > log maximum (200)
BIG_PER_COMMIT = 3  # 630 versions, chunks and links: > every other maximum


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    opened = Api(tmp_path_factory.mktemp("big") / "data")
    opened.agent(AGENT)
    for c in range(BIG_COMMITS):
        ops = [
            Put(f"/memories/n{c:03d}-{i}.md", f"# N {c} {i}\nsee [[n{c:03d}-{i}]]\n".encode())
            for i in range(BIG_PER_COMMIT)
        ]
        opened.store.apply(AGENT, ops, actor="test", message=f"bulk {c}")
    try:
        yield opened
    finally:
        opened.client.close()
        opened.store.close()


# ---- sections, defaults and maxima ------------------------------------------------------


def test_only_requested_sections_are_present(api: Api) -> None:
    api.agent(AGENT)
    api.write("/memories/a.md", "# A\nsee [b](b.md)\n")
    common = {*TOKENS, "readTimestamp"}
    assert set(api.inspect({})) == common
    assert set(api.inspect({"vectors": {}})) == common | {"vectors"}
    assert set(api.inspect({"log": {}})) == common | {"log"}
    graph = api.inspect({"graph": {}})
    assert set(graph) == common | {"graph"}
    assert set(graph["graph"]) == {"nodes", "edges"}
    assert len(graph["graph"]["nodes"]) == 1 and len(graph["graph"]["edges"]) == 1
    full = api.inspect(ALL)
    assert set(full) == common | {"vectors", "graph", "log"}
    assert len(full["vectors"]["chunks"]) == 1 and len(full["log"]["steps"]) == 1
    response = api.inspect_raw({"vectors": {}, "embeddings": {}})
    assert response.status_code == 400 and response.json()["details"]["field"] == "embeddings"


def test_default_and_maximum_page_sizes(big: Api) -> None:
    page = big.inspect(ALL)
    assert len(page["vectors"]["chunks"]) == 50
    assert len(page["graph"]["nodes"]) == 100
    assert len(page["graph"]["edges"]) == 100
    assert len(page["log"]["steps"]) == 50
    assert all(page[t] for t in TOKENS)
    huge = 10**9
    page = big.inspect(
        {
            "vectors": {"limit": huge},
            "graph": {"nodeLimit": huge, "edgeLimit": huge},
            "log": {"limit": huge},
        }
    )
    assert len(page["vectors"]["chunks"]) == 200
    assert len(page["graph"]["nodes"]) == 500
    assert len(page["graph"]["edges"]) == 500
    assert len(page["log"]["steps"]) == 200
    assert all(page[t] for t in TOKENS)


@pytest.mark.parametrize("bad", [0, -1, 1.5, "10", True, [5]])
@pytest.mark.parametrize(
    ("section", "field"),
    [
        ("vectors", "limit"),
        ("graph", "nodeLimit"),
        ("graph", "edgeLimit"),
        ("log", "limit"),
    ],
)
def test_limit_below_one_or_not_an_integer_is_400(
    big: Api, section: str, field: str, bad: object
) -> None:
    response = big.inspect_raw({section: {field: bad}})
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["code"] == "invalid_request"
    assert body["details"]["field"] == f"{section}.{field}"


def test_tokens_are_empty_exactly_when_each_listing_is_exhausted(api: Api) -> None:
    api.agent(AGENT)
    for i in range(4):  # 4 commits, 4 nodes, 4 chunks, 2 edges
        link = f"[x](/memories/m{i - 1}.md)" if i % 2 else "no link"
        api.write(f"/memories/m{i}.md", f"# M{i}\n{link}\n")
    # exactly a full page and nothing after it: the token is already ""
    exact = api.inspect({"log": {"limit": 4}, "graph": {"nodeLimit": 4, "edgeLimit": 2}})
    assert exact["nextLogToken"] == exact["nextNodeToken"] == exact["nextEdgeToken"] == ""
    assert exact["nextChunkToken"] == ""  # not asked: nothing to continue
    # one short of it: a token
    short = api.inspect({"log": {"limit": 3}, "graph": {"nodeLimit": 3, "edgeLimit": 1}})
    assert short["nextLogToken"] and short["nextNodeToken"] and short["nextEdgeToken"]
    # pages of 3: edges (2) end on page 1, the others on page 2, independently
    first = api.inspect(
        {"vectors": {"limit": 3}, "graph": {"nodeLimit": 3, "edgeLimit": 3}, "log": {"limit": 3}}
    )
    assert first["nextEdgeToken"] == "" and len(first["graph"]["edges"]) == 2
    assert first["nextChunkToken"] and first["nextNodeToken"] and first["nextLogToken"]
    second = api.inspect(
        {
            "vectors": {"limit": 3, "pageToken": first["nextChunkToken"]},
            "log": {"limit": 3, "pageToken": first["nextLogToken"]},
            "asOf": first["readTimestamp"],
        }
    )
    assert len(second["vectors"]["chunks"]) == 1 and len(second["log"]["steps"]) == 1
    assert all(second[t] == "" for t in TOKENS)
    walked, _, _ = api.walk({"chunks": 1, "nodes": 1, "edges": 1, "log": 1})
    whole = api.inspect(ALL)
    assert walked["chunks"] == whole["vectors"]["chunks"]
    assert walked["nodes"] == whole["graph"]["nodes"]
    assert walked["edges"] == whole["graph"]["edges"]
    assert walked["log"] == whole["log"]["steps"]


# ---- what the listings hold ---------------------------------------------------------------

BIG_SECTION = "## Long\n" + "".join(f"line {i} ünïcödé ✓\n" for i in range(200))  # > 2 KiB


def test_chunks_cover_every_stored_version_with_their_bytes(api: Api) -> None:
    api.agent(AGENT)
    a1 = "---\ndescription: first\n---\n# Héllo\nwörld ✓\n## Next\nmore\n"
    api.write("/memories/a.md", a1)
    api.write("/memories/a.md", "# Héllo\nchanged 日本\n")
    api.delete("/memories/a.md")
    api.write("/memories/b.md", "# B\nintro\n" + BIG_SECTION)
    api.write("/memories/empty.md", "")
    api.write("/memories/c.md", "# C\n")
    api.call(
        "POST",
        f"/v1/agents/{enc(AGENT)}/memory:command",
        json={"command": "rename", "old_path": "/memories/c.md", "new_path": "/memories/d.md"},
    )
    walked, pin, _ = api.walk({"chunks": 4})
    chunks = walked["chunks"]
    for chunk in chunks:
        assert set(chunk) == CHUNK_KEYS  # documented metadata, and never a vector
        assert chunk["agentId"] == AGENT
    by_version: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for chunk in chunks:
        by_version.setdefault((chunk["path"], chunk["version"]), []).append(chunk)
    expected: set[tuple[str, int]] = set()
    for path in ("/memories/a.md", "/memories/b.md", "/memories/empty.md"):
        expected |= {(path, v["version"]) for v in api.versions(path) if v["contentSha256"]}
    expected |= {("/memories/c.md", 1), ("/memories/d.md", 1)}
    assert set(by_version) == expected  # superseded, deleted and renamed ones included
    assert ("/memories/a.md", 3) not in by_version  # the tombstone has no content

    for (path, number), pieces in by_version.items():
        data = api.raw(path, number)
        meta = next(v for v in api.versions(path) if v["version"] == number)
        assert [p["chunkIndex"] for p in pieces] == list(range(len(pieces)))
        assert pieces[0]["byteStart"] == 0 and pieces[-1]["byteEnd"] == len(data)
        for before, after in itertools.pairwise(pieces):
            assert before["byteEnd"] == after["byteStart"]  # they tile the content
        for piece in pieces:
            assert data[piece["byteStart"] : piece["byteEnd"]].decode() == piece["content"]
            assert piece["contentSha256"] == sha(data) == meta["contentSha256"]
            assert piece["validFrom"] == meta["validFrom"]
            assert piece["validTo"] == meta["validTo"]
            assert piece["superseded"] is (meta["validTo"] is not None)
    a_v1 = by_version[("/memories/a.md", 1)]
    assert [p["heading"] for p in a_v1] == [None, "Héllo", "Next"]  # frontmatter first
    assert all(p["superseded"] for p in by_version[("/memories/a.md", 2)])  # deleted
    assert by_version[("/memories/a.md", 2)][0]["validTo"] is not None
    long = [p for p in by_version[("/memories/b.md", 1)] if p["heading"] == "Long"]
    assert len(long) >= 2 and all(p["truncated"] for p in long)
    assert all(len(p["content"].encode()) <= 2048 for p in long)
    assert not any(p["truncated"] for p in by_version[("/memories/b.md", 1)][:1])
    empty = by_version[("/memories/empty.md", 1)]
    assert [(p["byteStart"], p["byteEnd"], p["content"]) for p in empty] == [(0, 0, "")]
    assert parse_ts(pin) >= max(parse_ts(c["validFrom"]) for c in chunks)


def test_graph_nodes_are_versions_and_edges_name_the_version_holding_each_link(
    api: Api,
) -> None:
    api.agent(AGENT)
    api.write("/memories/notes/b.md", "# B\n")
    api.write("/memories/c.md", "# C\n")
    v1 = (
        "# A\n[abs](/memories/notes/b.md) [rel](../c.md) [[notes/b]] [[missing]]\n"
        "```\n[in code](/memories/never.md)\n```\n[web](https://example.com/x.md)\n"
    )
    api.write("/memories/notes/a.md", v1)
    api.write("/memories/notes/a.md", "# A\nonly [[c]] now\n")
    api.delete("/memories/c.md")
    graph, _, _ = api.walk({"nodes": 2, "edges": 2})
    nodes = {(n["path"], n["version"]): n for n in graph["nodes"]}
    assert set(nodes) == {
        ("/memories/c.md", 1),
        ("/memories/notes/a.md", 1),
        ("/memories/notes/a.md", 2),
        ("/memories/notes/b.md", 1),
    }
    assert nodes[("/memories/notes/a.md", 1)]["superseded"] is True
    assert nodes[("/memories/notes/a.md", 2)]["superseded"] is False
    assert nodes[("/memories/c.md", 1)]["superseded"] is True  # deleted since
    for node in graph["nodes"]:
        assert node["id"] == f"{AGENT}:{node['path']}@{node['version']}"
        assert node["agentId"] == AGENT
    edges = [(e["sourcePath"], e["sourceVersion"], e["targetPath"]) for e in graph["edges"]]
    assert edges == [
        ("/memories/notes/a.md", 1, "/memories/notes/b.md"),  # absolute and [[notes/b]]
        ("/memories/notes/a.md", 1, "/memories/c.md"),  # relative ../c.md
        ("/memories/notes/a.md", 1, "/memories/missing.md"),
        ("/memories/notes/a.md", 2, "/memories/c.md"),
    ]
    first = graph["edges"][0]
    assert first["source"] == f"{AGENT}:/memories/notes/a.md@1"
    assert first["target"] == f"{AGENT}:/memories/notes/b.md@1" and first["targetExists"]
    assert graph["edges"][3]["targetExists"] is False  # c.md is deleted at the pin
    assert graph["edges"][2]["target"] is None


def test_log_lists_commit_steps_oldest_first(api: Api) -> None:
    api.agent(AGENT)
    acks = [
        api.write("/memories/a.md", "one", msg="first"),
        api.write("/memories/b.md", "two", msg="second"),
        api.write("/memories/a.md", "three", msg="third"),
    ]
    api.delete("/memories/b.md")
    log, _, _ = api.walk({"log": 2})
    assert [s["type"] for s in log["log"]] == ["commit"] * 4
    assert [s["revision"] for s in log["log"]] == [1, 2, 3, 4]
    assert [s["message"] for s in log["log"]] == ["first", "second", "third", ""]
    assert all(s["actor"] == "admin" and s["agentId"] == AGENT for s in log["log"])
    stamps = [parse_ts(s["timestamp"]) for s in log["log"]]
    assert stamps == sorted(stamps) and len(set(stamps)) == 4
    assert [s["timestamp"] for s in log["log"][:3]] == [a["updatedAt"] for a in acks]
    assert log["log"][3]["changes"][0]["operation"] == "deleted"
    assert log["log"][2]["changes"][0]["version"] == 2


def test_log_shows_run_steps_once_a_delivery_ran(api: Api) -> None:
    api.agent(AGENT)
    api.write("/memories/a.md", "before")
    response = api.call("PUT", f"/v1/agents/{enc(AGENT)}/triggers/hook", json={"prompt": "p"})
    assert response.status_code == 201, response.text
    secret = response.json()["secret"]
    body = b'{"action": "opened"}'
    stamp = int(time.time())
    delivered = api.client.post(
        f"/v1/agents/{enc(AGENT)}/triggers/hook:deliver",
        content=body,
        headers={
            "webhook-id": "msg_1",
            "webhook-timestamp": str(stamp),
            "webhook-signature": sign(secret, "msg_1", stamp, body),
            "content-type": "application/json",
        },
    )
    assert delivered.status_code == 202, delivered.text
    run_id = delivered.json()["id"]
    steps = api.inspect({"log": {}})["log"]["steps"]
    assert [s["type"] for s in steps] == ["commit", "run"]
    assert steps[1]["step"] == "created" and steps[1]["runId"] == run_id

    async def drive() -> None:
        runner = Runner(api.store, api.app.services.keys, base_url="http://test", concurrency=1)
        await runner.poll()
        await asyncio.gather(*runner.active.values())

    asyncio.run(drive())
    steps = api.inspect({"log": {}})["log"]["steps"]
    kinds = [(s["type"], s.get("step"), s.get("actor")) for s in steps]
    assert kinds == [
        ("commit", None, "admin"),
        ("run", "created", None),
        ("run", "claimed", None),
        ("commit", None, f"run:{run_id}"),  # the delivery stored as a memory
        ("run", "succeeded", None),
    ]
    assert all(s["runId"] == run_id for s in steps if s["type"] == "run")
    assert [s["seq"] for s in steps if s["type"] == "run"] == [1, 2, 3]


# ---- scopes --------------------------------------------------------------------------------


def test_scope_covers_the_subject_and_agents_below_it_only(api: Api) -> None:
    inside = ["users/alice", "users/alice/x", "users/alice/x/y"]
    outside = ["users/alicex", "users/alice-b", "users/alice.c", "users/bob", "users"]
    for agent_id in sorted(inside + outside):
        api.agent(agent_id)
        api.write("/memories/m.md", f"# {agent_id}\n[[m]]\n", agent_id=agent_id)
        api.write("/memories/m.md", f"# {agent_id} v2\n[[m]]\n", agent_id=agent_id)
    walked, _, requests = api.walk(
        {"chunks": 1, "nodes": 1, "edges": 1, "log": 1}, scope="users/alice"
    )
    assert requests == 6  # single-item pages, crossing from agent to agent
    for listing in ("chunks", "nodes", "edges", "log"):
        agents = [item["agentId"] for item in walked[listing]]
        assert sorted(set(agents)) == inside, listing
    assert [(n["agentId"], n["version"]) for n in walked["nodes"]] == [
        (a, v) for a in inside for v in (1, 2)
    ]
    assert len(walked["log"]) == 6
    stamps = [parse_ts(s["timestamp"]) for s in walked["log"]]
    assert stamps == sorted(stamps)  # one log for the workspace, oldest first
    one = api.inspect(ALL, agent_id="users/alice")
    assert {n["agentId"] for n in one["graph"]["nodes"]} == {"users/alice"}


# ---- pinning -----------------------------------------------------------------------------


def test_as_of_reads_the_store_as_it_was(api: Api) -> None:
    api.agent(AGENT)
    empty = api.inspect({**ALL, "asOf": "2000-01-01T00:00:00Z"})
    assert empty["readTimestamp"] == "2000-01-01T00:00:00.000000Z"
    assert empty["vectors"]["chunks"] == [] and empty["log"]["steps"] == []
    assert empty["graph"] == {"nodes": [], "edges": []}
    assert all(empty[t] == "" for t in TOKENS)
    first = api.write("/memories/a.md", "# one\n[[b]]\n")
    api.write("/memories/b.md", "# b\n")
    api.write("/memories/a.md", "# two\n")
    before = api.inspect({**ALL, "asOf": format_ts(parse_ts(first["updatedAt"]) - 1)})
    assert before["graph"]["nodes"] == [] and before["log"]["steps"] == []
    then = api.inspect({**ALL, "asOf": first["updatedAt"]})
    assert [(n["path"], n["version"]) for n in then["graph"]["nodes"]] == [("/memories/a.md", 1)]
    assert then["graph"]["nodes"][0]["superseded"] is False
    assert then["graph"]["nodes"][0]["validTo"] is None  # not yet replaced back then
    assert then["graph"]["edges"][0]["targetExists"] is False  # b.md came later
    assert [s["revision"] for s in then["log"]["steps"]] == [1]
    now = api.inspect(ALL)
    assert len(now["graph"]["nodes"]) == 3 and now["graph"]["nodes"][0]["superseded"] is True


@pytest.mark.parametrize(
    "as_of",
    [
        "future",
        "yesterday",
        "2026-01-02",
        "2026-01-02T03:04:05",  # no time zone
        "20260102T030405Z",  # ISO 8601 basic format, not RFC 3339
        "2026-13-02T03:04:05Z",
        1767323045,
    ],
)
def test_as_of_in_the_future_or_not_rfc3339_is_400(api: Api, as_of: object) -> None:
    api.agent(AGENT)
    api.write("/memories/a.md", "x")
    if as_of == "future":
        as_of = (datetime.now(UTC) + timedelta(minutes=5)).isoformat()
    response = api.inspect_raw({"log": {}, "asOf": as_of})
    assert response.status_code == 400, response.text
    assert response.json()["code"] == "invalid_request"
    assert response.json()["details"]["field"] == "asOf"


def test_a_walk_pinned_before_later_commits_never_sees_them(api: Api) -> None:
    api.agent(AGENT)
    for i in range(6):
        api.write(f"/memories/m{i}.md", f"# {i}\n")
    first = api.inspect({"graph": {"nodeLimit": 2}, "log": {"limit": 2}})
    pin = first["readTimestamp"]
    api.write("/memories/m0.md", "# changed\n")  # acknowledged after the pin
    api.write("/memories/zz.md", "# new\n")
    rest, _, _ = api.walk({"nodes": 2, "log": 2}, as_of=pin)
    assert [(n["path"], n["version"]) for n in rest["nodes"]] == [
        (f"/memories/m{i}.md", 1) for i in range(6)
    ]
    assert all(n["superseded"] is False for n in rest["nodes"])
    assert [s["revision"] for s in rest["log"]] == list(range(1, 7))
    second = api.inspect({"graph": {"nodeLimit": 2}, "log": {"limit": 2}, "asOf": pin})
    assert second["graph"]["nodes"] == first["graph"]["nodes"]


def test_an_as_of_between_the_clock_and_now_waits_for_a_commit_in_flight(api: Api) -> None:
    """A commit stamped before a client's asOf but visible only after the first page
    must not appear on a later page of the walk pinned at that asOf."""
    api.agent(AGENT)
    api.write("/memories/a.md", "# a\n")
    stamped = threading.Event()
    real_put = api.store.backend.put_if_absent

    def slow_put(key: str, data: bytes) -> bool:
        if "/log/" in key and not stamped.is_set():  # the writer's commit (b.md)
            stamped.set()  # the commit has its timestamp and holds the write lock
            time.sleep(0.5)
        return real_put(key, data)

    api.store.backend.put_if_absent = slow_put  # type: ignore[method-assign]
    writer = threading.Thread(
        target=api.store.write,
        args=(AGENT, "/memories/b.md", b"# b\n"),
        kwargs={"actor": "w"},
        name="writer",
    )
    writer.start()
    try:
        assert stamped.wait(10)
        as_of = format_ts(now_us())  # after the commit's timestamp, before it is visible
        first = api.inspect({"graph": {}, "asOf": as_of})
    finally:
        writer.join()
    later = api.inspect({"graph": {}, "asOf": as_of})
    assert later == first
    assert [n["path"] for n in first["graph"]["nodes"]] == ["/memories/a.md", "/memories/b.md"]
    api.write("/memories/c.md", "# c\n")  # committed after the pinned read: after the pin
    assert api.inspect({"graph": {}, "asOf": as_of}) == first


# ---- tokens and access ------------------------------------------------------------------


def test_tokens_refused_when_altered_foreign_or_expired(
    api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    for agent_id in (AGENT, "users/bob"):
        api.agent(agent_id)
        for i in range(3):
            api.write(f"/memories/m{i}.md", f"# {i}\n[[m{i}]]\n", agent_id=agent_id)
    small = {"vectors": {"limit": 1}, "graph": {"nodeLimit": 1, "edgeLimit": 1}}
    page = api.inspect({**small, "log": {"limit": 1}})
    chunk, node, edge, log = (page[t] for t in TOKENS)
    assert all((chunk, node, edge, log))

    def refused(body: dict[str, Any], **kw: Any) -> None:
        response = api.inspect_raw(body, **kw)
        assert response.status_code == 400, response.text
        assert response.json()["code"] == "invalid_request"
        assert response.json()["details"]["field"] == "pageToken"

    body, mac = node.split(".")
    altered = body[:-2] + ("A" if body[-2] != "A" else "B") + body[-1] + "." + mac
    refused({"graph": {"nodePageToken": altered}})
    refused({"graph": {"nodePageToken": node[:-1] + ("x" if node[-1] != "x" else "y")}})
    refused({"graph": {"nodePageToken": "not-a-token"}})
    refused({"graph": {"nodePageToken": node}}, agent_id="users/bob")  # another agent
    refused({"graph": {"nodePageToken": node}}, scope=AGENT)  # the scope of the same id
    refused({"log": {"pageToken": node}})  # another section
    refused({"vectors": {"pageToken": log}})
    refused({"graph": {"edgePageToken": node}})  # the other graph listing
    refused({"graph": {"nodePageToken": chunk}})
    other_pin = format_ts(parse_ts(page["readTimestamp"]) - 1)
    refused({"graph": {"nodePageToken": node}, "asOf": other_pin})  # another pin
    scope_page = api.inspect(small, scope="users")
    refused({"graph": {"nodePageToken": scope_page["nextNodeToken"]}})  # scope → agent
    assert api.inspect({"graph": {"nodePageToken": node}})["graph"]["nodes"]  # still good

    now = time.time()
    monkeypatch.setattr(memfs.core.tokens, "time", types.SimpleNamespace(time=lambda: now + 23 * 3600))
    assert api.inspect({"graph": {"nodePageToken": node}})["graph"]["nodes"]
    monkeypatch.setattr(memfs.core.tokens, "time", types.SimpleNamespace(time=lambda: now + 25 * 3600))
    refused({"graph": {"nodePageToken": node}})
    refused({"log": {"pageToken": log}})


def test_inspect_needs_the_inspect_scope(api: Api) -> None:
    for agent_id in (AGENT, "users/bob"):
        api.agent(agent_id)
        api.write("/memories/a.md", "# a\n", agent_id=agent_id)

    def key(key_id: str, scopes: list[str]) -> str:
        response = api.call("PUT", f"/v1/tenant/keys/{key_id}", json={"scopes": scopes})
        assert response.status_code == 201, response.text
        secret: str = response.json()["secret"]
        return secret

    reader = key("reader", ["memories:read", "memories:write", "agents:*"])
    auditor = key("auditor", ["inspect", f"agents:{AGENT}"])
    for kw in ({"agent_id": AGENT}, {"scope": AGENT}, {"scope": "users"}):
        response = api.inspect_raw(ALL, key=reader, **kw)
        assert response.status_code == 403, response.text
        assert response.json()["code"] == "forbidden"
    assert api.inspect(ALL, key=auditor)["graph"]["nodes"]
    assert api.inspect(ALL, key=auditor, scope=AGENT)["graph"]["nodes"]
    assert api.inspect_raw(ALL, key=auditor, agent_id="users/bob").status_code == 403
    assert api.inspect_raw(ALL, key=auditor, scope="users").status_code == 403


# ---- the CLI walks the same view ------------------------------------------------------


def test_cli_inspect_prints_every_item_once(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = Store(data)
    try:
        store.create_agent(AGENT)
        # more edges (600) than one CLI graph page (500), fewer nodes: nodes end first
        links = "".join(f"[[t{i}]]\n" for i in range(200))
        for n in range(3):
            store.write(AGENT, f"/memories/n{n}.md", f"# n{n}\n{links}".encode(), actor="t")
    finally:
        store.close()
    done = subprocess.run(
        [sys.executable, "-m", "memfs.cli", "inspect", AGENT, "--data", str(data)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    count = {s: sum(1 for x in lines if x["section"] == s) for s in ("chunks", "nodes", "edges")}
    assert count == {"chunks": 3, "nodes": 3, "edges": 600}
    assert sum(1 for x in lines if x["section"] == "log") == 3


def test_continuing_one_graph_listing_does_not_restart_the_other(api: Api) -> None:
    api.agent(AGENT)
    for i in range(4):
        api.write(f"/memories/n{i}.md", f"# n{i}\nsee [[n{(i + 1) % 4}]] and [[n{(i + 2) % 4}]]\n")
    first = api.inspect({"graph": {"nodeLimit": 1, "edgeLimit": 1}})
    assert len(first["graph"]["nodes"]) == 1 and len(first["graph"]["edges"]) == 1
    pin = first["readTimestamp"]
    edges = api.inspect(
        {"graph": {"edgeLimit": 3, "edgePageToken": first["nextEdgeToken"]}, "asOf": pin}
    )
    assert edges["graph"]["nodes"] == [] and edges["nextNodeToken"] == ""
    assert len(edges["graph"]["edges"]) == 3
    nodes = api.inspect(
        {"graph": {"nodeLimit": 10, "nodePageToken": first["nextNodeToken"]}, "asOf": pin}
    )
    assert [n["path"] for n in nodes["graph"]["nodes"]] == [f"/memories/n{i}.md" for i in (1, 2, 3)]
    assert nodes["graph"]["edges"] == []


def test_the_consoles_abbreviated_log_walks_like_the_full_one(tmp_path: Path) -> None:
    """``inspect(…, heads=True)`` (the console's log): the same steps in the same order,
    the same pages, tokens and pin as the API's; only a commit's ``changes`` cut to its
    first LOG_HEAD, with ``changeCount`` its total."""
    from memfs.core import inspect as inspecting
    from memfs.core.store import Delete
    from memfs.core.tokens import Signer
    from memfs.domain.commits import LOG_HEAD

    store = Store(tmp_path / "data")
    try:
        store.create_agent(AGENT, None)
        for c in range(3):
            ops = [Put(f"/memories/c{c}/{i:02}.md", b"x\n") for i in range(LOG_HEAD + c)]
            store.apply(AGENT, ops, actor="t", message=f"bulk {c}")
        store.apply(AGENT, [Delete("/memories/c0/00.md")], actor="t")
        target, signer = inspecting.Target("agent", AGENT), Signer(b"k" * 32)

        def walk(heads: bool) -> list[tuple[list[dict[str, Any]], str]]:
            pages: list[tuple[list[dict[str, Any]], str]] = []
            token: str | None = None
            pin: int | None = None
            while True:
                page = {"log": inspecting.Page(2, token)}
                body = inspecting.inspect(store, target, page, pin, signer, heads=heads)
                token, pin = body["nextLogToken"], parse_ts(body["readTimestamp"])
                # A token's pin and position (its expiry differs from call to call).
                at = inspecting._decode(signer, token, "log", target) if token else None
                pages.append((body["log"]["steps"], json.dumps(at)))
                if not token:
                    return pages

        full, heads = walk(False), walk(True)
        assert [t for _s, t in full] == [t for _s, t in heads]  # the same tokens
        assert [len(s) for s, _t in full] == [len(s) for s, _t in heads] == [2, 2]
        for every, head in zip(
            [s for p, _t in full for s in p], [s for p, _t in heads for s in p], strict=True
        ):
            count = len(every["changes"])
            assert head == {**every, "changes": every["changes"][:LOG_HEAD], "changeCount": count}
        assert [s["changeCount"] for p, _t in heads for s in p] == [
            LOG_HEAD,
            LOG_HEAD + 1,
            LOG_HEAD + 2,
            1,
        ]
    finally:
        store.close()
