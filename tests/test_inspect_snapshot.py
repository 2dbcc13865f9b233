"""A pinned ``memory:inspect`` walk is a snapshot, proved with real processes.

A real ``memfs serve --workers 2`` serves the walk while two writer processes commit
all along: one over HTTP (served by the same workers), one in local mode on the same
data folder (as the CLI does). The walk goes in small pages, pinned at its first
``readTimestamp``, over a scope holding both agents. Afterwards the expected view is
rebuilt from the canonical log files and each commit's ``visible_at`` (when its group
commit made it visible in the index: at or after its timestamp, since the entry is
made durable before it is indexed), so "visible at the pin" is "visible_at <= pin",
and must equal the walk.

Writers record, for each commit, when its request was sent and when the answer came
back (``time.monotonic_ns``, one clock for every process on the machine). The
server acknowledged the commit somewhere between the two, so:
- a commit sent after the first ``readTimestamp`` came back was acknowledged after
  it: it must be newer than the pin and absent from the walk;
- a commit answered before the first request was sent must be in the walk.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from memfs.canonical import layout
from memfs.canonical.backend import LocalBackend
from memfs.domain.commits import format_ts, parse_ts
from memfs.domain.links import extract_links
from servers_real import RealServer

SCOPE = "users/alice"
HTTP_AGENT = "users/alice"
LOCAL_AGENT = "users/alice/work"
OUTSIDE = "users/alicex"
LIMITS = {"chunks": 3, "nodes": 4, "edges": 5, "log": 3}

WRITER = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    from urllib.parse import quote

    mode, target, agent, out_path, stop_path, key = sys.argv[1:7]
    paths = [f"/memories/{mode}/n{i}.md" for i in range(10)]
    live = {}  # path -> (last version, exists)
    if mode == "http":
        import httpx

        client = httpx.Client(
            base_url=target,
            timeout=30,
            headers={"Authorization": f"Bearer {key}", "Memfs-Protocol": "1"},
        )
        base = f"/v1/agents/{quote(agent, safe='')}/memories/"

        def put(path, data):
            r = client.put(base + path[len("/memories/"):], content=data,
                           headers={"Content-Type": "text/markdown"})
            assert r.status_code in (200, 201), r.text
            return r.json()["version"]

        def delete(path):
            r = client.delete(base + path[len("/memories/"):])
            assert r.status_code == 204, r.text
    else:
        from memfs.core.store import Store

        store = Store(Path(target))

        def put(path, data):
            return store.write(agent, path, data, actor="local-writer").memory.version

        def delete(path):
            store.delete(agent, path, actor="local-writer")

    deadline = time.monotonic() + 90
    with open(out_path, "a", buffering=1) as out:
        i = 0
        while not os.path.exists(stop_path) and time.monotonic() < deadline:
            path = paths[(i * 7) % len(paths)]
            version, exists = live.get(path, (0, False))
            sent = time.monotonic_ns()
            if exists and i % 5 == 4:
                delete(path)
                version, exists, op = version + 1, False, "delete"
            else:
                text = (
                    f"# {path} step {i}\\n\\nsee [[{mode}/n{(i * 3) % 12}]] and "
                    f"[the root](../root.md)\\n\\n## Details\\n\\nwritten by {mode}\\n"
                )
                version, exists, op = put(path, text.encode()), True, "put"
            acked = time.monotonic_ns()
            live[path] = (version, exists)
            out.write(json.dumps({"agent": agent, "path": path, "op": op,
                                  "version": version, "sent": sent, "acked": acked}) + "\\n")
            i += 1
            if mode == "local":
                # Paced like a loop of 'memfs put': a tight loop of local commits starves
                # the server's writers of the index's write lock (SQLite's busy handler
                # is not fair), which is not what this test is about.
                time.sleep(0.01)
    """
)


def enc(value: str) -> str:
    return quote(value, safe="")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RealServer]:
    real = RealServer(tmp_path / "data", workers=2)
    try:
        yield real.start()
    finally:
        real.close()  # stops the whole process group by the id it started


class Writer:
    def __init__(self, tmp_path: Path, mode: str, target: str, agent: str, key: str) -> None:
        self.out = tmp_path / f"acks-{mode}.jsonl"
        self.stop_file = tmp_path / f"stop-{mode}"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER,
                mode,
                target,
                agent,
                str(self.out),
                str(self.stop_file),
                key,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )

    def acks(self) -> list[dict[str, Any]]:
        if not self.out.exists():
            return []
        lines = self.out.read_text().splitlines()
        return [json.loads(line) for line in lines if line.endswith("}")]

    def stop(self) -> None:
        self.stop_file.touch()
        try:
            _, err = self.proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        assert self.proc.returncode == 0, err.decode(errors="replace")


def walk(
    client: httpx.Client, url: str, limits: dict[str, int], as_of: str | None
) -> tuple[dict[str, list[dict[str, Any]]], str, int, int]:
    """A whole walk; (items by listing, its pin, monotonic ns of the first request sent
    and of its answer received)."""
    out: dict[str, list[dict[str, Any]]] = {name: [] for name in limits}
    tokens: dict[str, str] = {}
    done: set[str] = set()
    names = {
        "chunks": "nextChunkToken",
        "nodes": "nextNodeToken",
        "edges": "nextEdgeToken",
        "log": "nextLogToken",
    }
    pin = as_of
    sent = answered = 0
    while len(done) < len(limits):
        body: dict[str, Any] = {}
        if "chunks" not in done:
            body["vectors"] = {"limit": limits["chunks"], "pageToken": tokens.get("chunks")}
        if "nodes" not in done or "edges" not in done:
            body["graph"] = {
                "nodeLimit": limits["nodes"] if "nodes" not in done else 1,
                "edgeLimit": limits["edges"] if "edges" not in done else 1,
                "nodePageToken": tokens.get("nodes"),
                "edgePageToken": tokens.get("edges"),
            }
        if "log" not in done:
            body["log"] = {"limit": limits["log"], "pageToken": tokens.get("log")}
        if pin is not None:
            body["asOf"] = pin
        began = time.monotonic_ns()
        response = client.post(url, json=body)
        if not sent:
            sent, answered = began, time.monotonic_ns()
        assert response.status_code == 200, response.text
        page = response.json()
        pin = pin or page["readTimestamp"]
        assert page["readTimestamp"] == pin
        found = {
            "chunks": page.get("vectors", {}).get("chunks", []),
            "nodes": page.get("graph", {}).get("nodes", []),
            "edges": page.get("graph", {}).get("edges", []),
            "log": page.get("log", {}).get("steps", []),
        }
        for listing in limits:
            if listing in done:
                continue  # an exhausted graph listing restarts from the top: ignored
            out[listing].extend(found[listing])
            token = page[names[listing]]
            if token:
                tokens[listing] = token
            else:
                done.add(listing)
    assert pin is not None
    return out, pin, sent, answered


def log_docs(data: Path, agent: str) -> list[dict[str, Any]]:
    """The agent's log entries, read from the data folder's segments."""
    backend = LocalBackend(data)
    keys = backend.list(layout.log_prefix(agent))
    return [json.loads(backend.get(key)) for key in keys]


def visible_ats(data: Path) -> dict[tuple[str, int], int]:
    """(agent, revision) → when the index made that commit visible."""
    uri = f"file:{data / 'index.sqlite'}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
        rows = conn.execute("SELECT agent_id, revision, visible_at FROM commits").fetchall()
    return {(agent, revision): at for agent, revision, at in rows}


def expected_view(data: Path, agents: list[str], pin: int) -> dict[str, Any]:
    """What a walk pinned at ``pin`` must return, from the log files and when each
    commit became visible."""
    visible_at = visible_ats(data)
    nodes: list[dict[str, Any]] = []
    contents: dict[tuple[str, str, int], str] = {}
    steps: list[tuple[int, str, dict[str, Any]]] = []
    live_at_pin: dict[tuple[str, str], int | None] = {}
    for agent in agents:
        commits = log_docs(data, agent)
        assert [c["revision"] for c in commits] == list(range(1, len(commits) + 1))
        for commit in commits:  # visible no earlier than its timestamp
            assert visible_at[(agent, commit["revision"])] >= parse_ts(commit["ts"])
        visible = [c for c in commits if visible_at[(agent, c["revision"])] <= pin]
        ended: dict[tuple[str, int], str] = {}  # (path, version) -> replaced at
        for commit in visible:
            steps.append((visible_at[(agent, commit["revision"])], agent, commit))
            for change in commit["changes"]:
                ended[(change["path"], change["version"] - 1)] = commit["ts"]
                live_at_pin[(agent, change["path"])] = (
                    change["version"] if change["after"] else None
                )
        for commit in visible:
            for change in commit["changes"]:
                if change["after"] is None:
                    continue
                valid_to = ended.get((change["path"], change["version"]))
                nodes.append(
                    {
                        "agentId": agent,
                        "path": change["path"],
                        "version": change["version"],
                        "contentSha256": change["after"],
                        "bytes": change["bytes"],
                        "validFrom": format_ts(parse_ts(commit["ts"])),
                        "validTo": format_ts(parse_ts(valid_to)) if valid_to else None,
                        "superseded": valid_to is not None,
                    }
                )
                contents[(agent, change["path"], change["version"])] = change["content"]
    nodes.sort(key=lambda n: (n["agentId"], n["path"], n["version"]))
    edges = []
    for node in nodes:
        agent, path, version = node["agentId"], node["path"], node["version"]
        for target in extract_links(contents[(agent, path, version)], path):
            live = live_at_pin.get((agent, target))
            edges.append(
                {
                    "agentId": agent,
                    "sourcePath": path,
                    "sourceVersion": version,
                    "targetPath": target,
                    "target": f"{agent}:{target}@{live}" if live else None,
                    "targetExists": live is not None,
                }
            )
    steps.sort(key=lambda s: (s[0], s[1]))
    log = [
        {
            "type": "commit",
            "agentId": agent,
            "revision": c["revision"],
            "timestamp": format_ts(parse_ts(c["ts"])),
            "actor": c["actor"],
            "message": c["message"],
            "changes": [{k: v for k, v in ch.items() if k != "content"} for ch in c["changes"]],
        }
        for _, agent, c in steps
    ]
    return {"nodes": nodes, "edges": edges, "log": log, "contents": contents}


def commit_of(data: Path, ack: dict[str, Any]) -> dict[str, Any]:
    """The log entry that made the version a writer was acknowledged for."""
    for commit in log_docs(data, ack["agent"]):
        if any(
            c["path"] == ack["path"] and c["version"] == ack["version"] for c in commit["changes"]
        ):
            return commit
    raise AssertionError(f"no commit for {ack}")


def test_a_pinned_walk_equals_the_log_at_its_pin_while_writers_commit(
    server: RealServer, tmp_path: Path
) -> None:
    data = server.data
    with server.client() as client:
        for agent in (HTTP_AGENT, LOCAL_AGENT, OUTSIDE):
            assert client.put(f"/v1/agents/{enc(agent)}", json={}).status_code == 201
        outside = f"/v1/agents/{enc(OUTSIDE)}/memories/x.md"
        markdown = {"Content-Type": "text/markdown"}
        assert client.put(outside, content=b"# x\n", headers=markdown).status_code == 201
        writers = [
            Writer(tmp_path, "http", server.url, HTTP_AGENT, server.admin_key),
            Writer(tmp_path, "local", str(data), LOCAL_AGENT, ""),
        ]
        try:
            deadline = time.monotonic() + 60
            while min(len(w.acks()) for w in writers) < 20:
                assert time.monotonic() < deadline, "writers made no progress"
                assert all(w.proc.poll() is None for w in writers), "a writer died"
                time.sleep(0.05)
            url = f"/v1/scopes/{enc(SCOPE)}/memory:inspect"
            first, pin, sent, answered = walk(client, url, LIMITS, None)
            walk_end = time.monotonic_ns()
            agent_walk, _, _, _ = walk(
                client, f"/v1/agents/{enc(HTTP_AGENT)}/memory:inspect", LIMITS, pin
            )
            seen = sum(len(w.acks()) for w in writers)
            while sum(len(w.acks()) for w in writers) < seen + 10:
                assert time.monotonic() < deadline + 30, "writers stalled"
                time.sleep(0.05)
            again, _, _, _ = walk(client, url, {"chunks": 5, "nodes": 3, "edges": 2, "log": 4}, pin)
        finally:
            for writer in writers:
                writer.stop()
    acks = [a for w in writers for a in w.acks()]

    # the walk is exactly the state the log gives at the pin
    at = parse_ts(pin)
    view = expected_view(data, [HTTP_AGENT, LOCAL_AGENT], at)
    keys = set(view["nodes"][0])
    assert [{k: n[k] for k in keys} for n in first["nodes"]] == view["nodes"]
    assert all(n["id"] == f"{n['agentId']}:{n['path']}@{n['version']}" for n in first["nodes"])
    assert [{k: e[k] for k in view["edges"][0]} for e in first["edges"]] == view["edges"]
    assert first["log"] == view["log"]
    pieces: dict[tuple[str, str, int], str] = {}
    for chunk in first["chunks"]:
        key = (chunk["agentId"], chunk["path"], chunk["version"])
        pieces[key] = pieces.get(key, "") + chunk["content"]
        node = next(n for n in view["nodes"] if (n["agentId"], n["path"], n["version"]) == key)
        assert chunk["validTo"] == node["validTo"] and chunk["superseded"] == node["superseded"]
    assert pieces == view["contents"]
    assert {n["agentId"] for n in first["nodes"]} == {HTTP_AGENT, LOCAL_AGENT}

    # the same pin later, with other page sizes, from another walk: the same view
    assert again == first
    assert agent_walk["nodes"] == [n for n in first["nodes"] if n["agentId"] == HTTP_AGENT]
    assert agent_walk["log"] == [s for s in first["log"] if s["agentId"] == HTTP_AGENT]

    # acknowledgements against the pin
    in_walk = {(s["agentId"], s["revision"]) for s in first["log"]}
    after = [a for a in acks if a["sent"] > answered]
    before = [a for a in acks if a["acked"] < sent]
    during = [a for a in acks if answered < a["acked"] < walk_end]
    assert len(before) >= 40 and len(after) >= 10 and during, (len(before), len(after))
    for ack in after:
        commit = commit_of(data, ack)
        assert parse_ts(commit["ts"]) > at, ack
        assert (ack["agent"], commit["revision"]) not in in_walk, ack
    for ack in before:
        commit = commit_of(data, ack)
        assert parse_ts(commit["ts"]) <= at, ack
        assert (ack["agent"], commit["revision"]) in in_walk, ack
