"""MCP: the tool table over a real ``memfs serve`` (Streamable HTTP at /mcp/agents/…) and
a real ``memfs mcp`` stdio subprocess, driven by the official SDK's client.

Every answer is compared with what the HTTP API answers for the same request
(``memory:command``, ``GET …/versions``, ``GET …/memories/…?version=``).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from servers_real import ADMIN_KEY, RealServer, headers, memfs_cli

TOOL_NAMES = {
    "view",
    "create",
    "str_replace",
    "insert",
    "delete",
    "rename",
    "search",
    "history",
    "read_version",
}
Call = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Answer:
    text: str
    error: bool


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def session(
    target: str | StdioServerParameters,
    calls: list[Call],
    *,
    key: str = ADMIN_KEY,
    extra: dict[str, str] | None = None,
    mode: str = "auto",
) -> tuple[list[Any], list[Answer]]:
    """One SDK client session: the listed tools, then each call's answer in order.
    ``mode="legacy"``: the 2025 initialize handshake (today's Claude clients)."""

    async def go(client: Client) -> tuple[list[Any], list[Answer]]:
        async with client:
            listed = (await client.list_tools()).tools
            answers = []
            for name, arguments in calls:
                result = await client.call_tool(name, arguments)
                texts = [block.text for block in result.content]
                answers.append(Answer("".join(texts), result.is_error))
            return listed, answers

    async def connect() -> tuple[list[Any], list[Answer]]:
        if isinstance(target, StdioServerParameters):
            return await go(Client(target, read_timeout_seconds=60, mode=mode))
        auth = {"Authorization": f"Bearer {key}", **(extra or {})}
        async with httpx2.AsyncClient(headers=auth, timeout=60) as http:
            transport = streamable_http_client(target, http_client=http)
            return await go(Client(transport, read_timeout_seconds=60, mode=mode))

    return asyncio.run(connect())


def stdio(data: Path, agent: str, *extra: str, env: dict[str, str] | None = None) -> Any:
    argv = ["-m", "memfs.cli", "mcp", "--agent", agent, "--data", str(data), *extra]
    return StdioServerParameters(command=sys.executable, args=argv, env=env or _env())


# ---- a server shared by the HTTP tests ----------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealServer]:
    with RealServer(tmp_path_factory.mktemp("mcp") / "data") as real:
        yield real


def api(server: RealServer) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers=headers(), timeout=60)


def make_agent(server: RealServer, agent: str) -> None:
    with api(server) as http:
        http.put(f"/v1/agents/{quote(agent, safe='')}", json={}).raise_for_status()


def make_key(server: RealServer, key_id: str, *scopes: str) -> str:
    with api(server) as http:
        answer = http.put(f"/v1/tenant/keys/{key_id}", json={"scopes": list(scopes)})
        answer.raise_for_status()
        secret: str = answer.json()["secret"]
        return secret


def mcp_url(server: RealServer, agent: str) -> str:
    return f"{server.url}/mcp/agents/{agent}"


def command_api(server: RealServer, agent: str, doc: dict[str, Any]) -> Answer:
    with api(server) as http:
        body = http.post(f"/v1/agents/{quote(agent, safe='')}/memory:command", json=doc).json()
        return Answer(body["result"], not body["ok"])


def revision(server: RealServer, agent: str) -> int:
    with api(server) as http:
        answer: int = http.get(f"/v1/agents/{quote(agent, safe='')}").json()["revision"]
        return answer


# A run of the memory tool that exercises every command and several refusals.
SCRIPT: list[Call] = [
    ("view", {"path": "/memories"}),
    ("create", {"path": "/memories/notes/project.md", "file_text": "# Project\nalpha\nbeta\n"}),
    ("create", {"path": "/memories/notes/project.md", "file_text": "# Project\nalpha\nbeta\n"}),
    ("str_replace", {"path": "/memories/notes/project.md", "old_str": "alpha", "new_str": "gamma"}),
    ("str_replace", {"path": "/memories/notes/project.md", "old_str": "nope", "new_str": "x"}),
    ("insert", {"path": "/memories/notes/project.md", "insert_line": 1, "insert_text": "first"}),
    ("insert", {"path": "/memories/notes/project.md", "insert_line": 99, "insert_text": "x"}),
    ("view", {"path": "/memories/notes/project.md", "view_range": [2, 3]}),
    ("rename", {"old_path": "/memories/notes/project.md", "new_path": "/memories/done.md"}),
    ("view", {"path": "/memories"}),
    ("create", {"path": "/memories/tmp.md", "file_text": "scratch"}),
    ("delete", {"path": "/memories/tmp.md"}),
    ("delete", {"path": "/memories/missing.md"}),
    ("view", {"path": "/memories/../etc/passwd"}),
    ("create", {"path": "/etc/passwd", "file_text": "x"}),
    ("insert", {"path": "/memories/done.md", "insert_line": "2", "insert_text": "x"}),
    ("view", {"path": 7}),
    ("create", {"path": "/memories/x.md"}),
]


def test_http_lists_every_tool_with_a_schema_and_a_description(server: RealServer) -> None:
    make_agent(server, "list/agent")
    listed, _ = session(mcp_url(server, "list/agent"), [])
    assert {tool.name for tool in listed} == TOOL_NAMES
    for tool in listed:
        assert tool.input_schema["type"] == "object", tool.name
        assert tool.input_schema["required"], tool.name
        assert len(tool.description or "") > 40, tool.name
    read_only = {t.name for t in listed if t.annotations and t.annotations.read_only_hint}
    assert read_only == {"view", "search", "history", "read_version"}


def test_http_memory_tool_answers_equal_memory_command(server: RealServer) -> None:
    make_agent(server, "same/mcp")
    make_agent(server, "same/api")
    _, answers = session(mcp_url(server, "same/mcp"), SCRIPT)
    expected = [command_api(server, "same/api", {"command": n, **a}) for n, a in SCRIPT]
    assert answers == expected
    assert [a.error for a in answers[:5]] == [False, False, True, False, True]
    assert not answers[8].error and "done.md" in answers[9].text
    assert all(a.error for a in answers[-5:])  # escapes and wrong types are refusals


def test_http_history_and_read_version_equal_the_api_reads(server: RealServer) -> None:
    agent = "users/alice/history"
    make_agent(server, agent)
    path = "/memories/a.md"
    calls: list[Call] = [
        ("create", {"path": path, "file_text": "one\n"}),
        ("str_replace", {"path": path, "old_str": "one", "new_str": "two"}),
        ("delete", {"path": path}),
        ("history", {"path": path}),
        ("history", {"path": path, "limit": 2}),
        ("read_version", {"path": path, "version": 1}),
        ("read_version", {"path": path, "version": 3}),
    ]
    # The agent id may be written with %2F, as in the /v1 routes.
    _, answers = session(mcp_url(server, quote(agent, safe="")), calls)
    with api(server) as http:
        base = f"/v1/agents/{quote(agent, safe='')}"
        versions = http.get(f"{base}/versions", params={"path": path}).json()
        first_page = http.get(f"{base}/versions", params={"path": path, "limit": 2}).json()
        v1 = http.get(f"{base}/memories/a.md", params={"version": 1}).json()
        v3 = http.get(f"{base}/memories/a.md", params={"version": 3})
    assert json.loads(answers[3].text) == versions
    assert [v["operation"] for v in versions["versions"]] == ["created", "modified", "deleted"]
    page = json.loads(answers[4].text)
    assert page["versions"] == first_page["versions"] and page["nextCursor"]
    # The cursor is the API's own: it pages on in either.
    _, more = session(mcp_url(server, agent), [("history", {"path": path, "cursor": page["nextCursor"]})])
    assert json.loads(more[0].text)["versions"] == versions["versions"][2:]
    assert json.loads(answers[5].text) == v1
    assert v1["content"] == "one\n"
    assert answers[6].error and v3.json()["message"] in answers[6].text


def test_http_search_answers_equal_memory_query(server: RealServer) -> None:
    agent = "users/sam/search"
    make_agent(server, agent)
    notes = {
        "/memories/trips/kyoto.md": "---\ndescription: Kyoto trip\n---\nTemples and gardens in Kyoto.\n",
        "/memories/trips/oslo.md": "Oslo in winter: fjords, museums.\n",
        "/memories/food.md": "Ramen places near the Kyoto station.\n",
    }
    for path, text in notes.items():
        command_api(server, agent, {"command": "create", "path": path, "file_text": text})
    reader = make_key(server, "sam-ro", "memories:read", "agents:users/sam")
    other = make_key(server, "tim-ro", "memories:read", "agents:users/tim")
    queries: list[dict[str, Any]] = [
        {"query": "kyoto"},
        {"query": "kyoto", "pathPrefix": "/memories/trips/"},
        {"query": "kyoto -ramen", "limit": 1},
        {"query": '"in winter"'},
        {"query": "gard*"},
    ]
    bad: list[dict[str, Any]] = [
        {"query": ""},
        {"query": '"unbalanced'},
        {"query": "x" * 1025},
        {"query": 42},
        {"query": "kyoto", "limit": 0},
        {"query": "kyoto", "pageToken": "forged.token"},
        {"query": "kyoto", "pathPrefix": "/memories/../etc"},
        {"query": "kyoto", "agentId": "users/tim"},
    ]
    calls: list[Call] = [("search", q) for q in [*queries, *bad]]
    _, answers = session(mcp_url(server, agent), calls, key=reader)
    with api(server) as http:
        url = f"/v1/agents/{quote(agent, safe='')}/memory:query"
        expected = [http.post(url, json=q).json() for q in queries]
    assert [json.loads(a.text) for a in answers[: len(queries)]] == expected
    assert expected[0]["results"][0]["path"] == "/memories/trips/kyoto.md"
    assert [r["path"] for r in expected[2]["results"]] == ["/memories/trips/kyoto.md"]
    accepted = [q for q, a in zip(bad, answers[len(queries) :], strict=True) if not a.error]
    assert accepted == []
    # Paging with the API's token continues the same list.
    token = json.loads(answers[2].text)["nextPageToken"]
    _, more = session(
        mcp_url(server, agent), [("search", {"query": "kyoto -ramen", "limit": 1, "pageToken": token})]
    )
    with api(server) as http:
        page2 = http.post(url, json={"query": "kyoto -ramen", "limit": 1, "pageToken": token}).json()
    assert json.loads(more[0].text) == page2
    _, denied = session(mcp_url(server, agent), [("search", {"query": "kyoto"})], key=other)
    assert denied[0].error and "users/sam/search" in denied[0].text


def test_http_writes_are_commits_recorded_as_the_key_or_subject(server: RealServer) -> None:
    agent = "users/bob/assistant"
    make_agent(server, agent)
    secret = make_key(server, "bob-rw", "memories:read", "memories:write", "agents:users/bob")
    path = "/memories/who.md"
    session(mcp_url(server, agent), [("create", {"path": path, "file_text": "k"})], key=secret)
    narrowed = {"Memfs-Subject": "end-user-7", "Memfs-Scopes": "memories:write agents:users/bob"}
    session(
        mcp_url(server, agent),
        [("str_replace", {"path": path, "old_str": "k", "new_str": "s"})],
        key=secret,
        extra=narrowed,
        mode="legacy",
    )
    with api(server) as http:
        rows = http.get(
            f"/v1/agents/{quote(agent, safe='')}/versions", params={"path": path}
        ).json()["versions"]
    assert [(r["version"], r["actor"]) for r in rows] == [(1, "key:bob-rw"), (2, "subject:end-user-7")]


def test_http_a_key_without_write_scope_cannot_write(server: RealServer) -> None:
    agent = "users/carol/assistant"
    make_agent(server, agent)
    command_api(server, agent, {"command": "create", "path": "/memories/a.md", "file_text": "x"})
    reader = make_key(server, "carol-ro", "memories:read", "agents:users/carol")
    other = make_key(server, "dave-rw", "memories:read", "memories:write", "agents:users/dave")
    before = revision(server, agent)
    writes: list[Call] = [
        ("create", {"path": "/memories/b.md", "file_text": "x"}),
        ("str_replace", {"path": "/memories/a.md", "old_str": "x", "new_str": "y"}),
        ("insert", {"path": "/memories/a.md", "insert_line": 0, "insert_text": "y"}),
        ("delete", {"path": "/memories/a.md"}),
        ("rename", {"old_path": "/memories/a.md", "new_path": "/memories/c.md"}),
    ]
    _, answers = session(mcp_url(server, agent), [("view", {"path": "/memories/a.md"}), *writes], key=reader)
    assert not answers[0].error and "x" in answers[0].text
    assert all(a.error and "memories:write" in a.text for a in answers[1:])
    # A key for another agent reads nothing of this one.
    _, answers = session(mcp_url(server, agent), [("view", {"path": "/memories"}), *writes], key=other)
    assert all(a.error and "users/carol/assistant" in a.text for a in answers)
    assert revision(server, agent) == before
    assert command_api(server, agent, {"command": "view", "path": "/memories/a.md"}).text.endswith("x")


def test_http_refuses_bad_keys_and_browsers_and_needs_no_protocol_header(
    server: RealServer,
) -> None:
    make_agent(server, "refuse/agent")
    url = "/mcp/agents/refuse/agent"
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    mcp_headers = {"Accept": "application/json, text/event-stream"}
    with httpx.Client(base_url=server.url, timeout=60) as http:
        missing = http.post(url, json=body, headers=mcp_headers)
        wrong = http.post(url, json=body, headers={**mcp_headers, "Authorization": "Bearer nope"})
        browser = http.post(
            url,
            json=body,
            headers={**mcp_headers, "Authorization": f"Bearer {ADMIN_KEY}", "Origin": "https://evil.example"},
        )
        bare = http.post("/mcp", json=body, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
        bad_agent = http.post(
            "/mcp/agents/../x", json=body, headers={"Authorization": f"Bearer {ADMIN_KEY}"}
        )
        stream = http.get(url, headers={**mcp_headers, "Authorization": f"Bearer {ADMIN_KEY}"})
        end = http.delete(url, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
        garbage = http.post(
            url,
            content=b"{not json",
            headers={**mcp_headers, "Authorization": f"Bearer {ADMIN_KEY}", "Content-Type": "application/json"},
        )
    assert (missing.status_code, missing.json()["code"]) == (401, "unauthorized")
    assert (wrong.status_code, wrong.json()["details"]["field"]) == (401, "Authorization")
    assert (browser.status_code, browser.json()["details"]["field"]) == (403, "Origin")
    assert bare.status_code == 404 and "/mcp/agents/" in bare.json()["message"]
    assert bad_agent.status_code in (400, 404)
    # Stateless: no event stream to hold open, no session to end.
    assert (stream.status_code, stream.headers["allow"]) == (405, "POST")
    assert end.status_code == 405
    assert garbage.status_code == 400
    for answer in (missing, wrong, browser, bare):
        assert answer.headers["memfs-request-id"].startswith("req_")
    # The SDK's client sends no Memfs-Protocol header, and is answered.
    listed, _ = session(mcp_url(server, "refuse/agent"), [])
    assert len(listed) == len(TOOL_NAMES)
    # /metrics counts MCP requests under the route template, never an agent id.
    with httpx.Client(base_url=server.url, timeout=60) as http:
        metrics = http.get("/metrics").text
    assert 'route="/mcp/agents/{agentId}"' in metrics and "refuse/agent" not in metrics


def test_http_hostile_arguments_are_tool_errors_that_change_nothing(server: RealServer) -> None:
    agent = "hostile/agent"
    make_agent(server, agent)
    command_api(server, agent, {"command": "create", "path": "/memories/a.md", "file_text": "x"})
    before = revision(server, agent)
    huge = "x" * (102_400 + 1)  # over the default MEMFS_MEMORY_BYTES
    calls: list[Call] = [
        ("create", {"path": "/memories/big.md", "file_text": huge}),
        ("create", {"path": "/memories/../../escape.md", "file_text": "x"}),
        ("create", {"path": "/memories/\x00nul.md", "file_text": "x"}),
        ("create", {"path": ["/memories/a.md"], "file_text": "x"}),
        ("create", {"path": "/memories/a.md", "file_text": "x", "overwrite": True}),
        ("rename", {"old_path": "/memories/a.md", "new_path": "/tmp/a.md"}),
        ("str_replace", {"path": "/memories/a.md", "old_str": 1, "new_str": None}),
        ("history", {"path": "/memories/a.md", "limit": "all"}),
        ("history", {"path": "/memories/a.md", "limit": 10**9}),
        ("history", {"path": "/memories/a.md", "cursor": "forged.token"}),
        ("history", {"path": "/etc/passwd"}),
        ("read_version", {"path": "/memories/a.md", "version": True}),
        ("read_version", {"path": "/memories/a.md", "version": 2**70}),
        ("read_version", {"path": "/memories/a.md", "version": 99}),
        ("read_version", {"path": "/memories/../a.md", "version": 1}),
        ("no_such_tool", {}),
    ]
    _, answers = session(mcp_url(server, agent), calls)
    refused = [(name, a.text) for (name, _), a in zip(calls, answers, strict=True) if not a.error]
    assert refused == []
    assert "exceeds maximum size" in answers[0].text
    assert "overwrite" in answers[4].text
    assert revision(server, agent) == before
    # A body past memory:command's limit (6 memories) is refused before the MCP layer.
    call = {"name": "create", "arguments": {"path": "/memories/b.md", "file_text": "x" * 700_000}}
    with httpx.Client(base_url=server.url, timeout=60) as http:
        oversize = http.post(
            f"/mcp/agents/{agent}",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call},
            headers={"Authorization": f"Bearer {ADMIN_KEY}", "Accept": "application/json"},
        )
        assert oversize.status_code == 413
        assert http.get("/readyz").status_code == 200
    assert revision(server, agent) == before
    assert "Traceback" not in server.log_text()


# ---- stdio ----------------------------------------------------------------------------


def test_stdio_serves_every_tool_on_the_data_folder(tmp_path: Path) -> None:
    data = tmp_path / "data"
    agent = "users/alice/assistant"
    target = stdio(data, agent, "--actor", "claude-code")
    calls: list[Call] = [
        *SCRIPT,
        ("history", {"path": "/memories/done.md"}),
        ("read_version", {"path": "/memories/done.md", "version": 1}),
        ("history", {"path": "/memories/nothing.md"}),
        ("search", {"query": "gamma"}),
    ]
    listed, answers = session(target, calls)
    assert {tool.name for tool in listed} == TOOL_NAMES
    # The same texts as memory:command on a server (the HTTP test's agent saw them).
    assert answers[1].text == "File created successfully at: /memories/notes/project.md"
    assert not answers[3].error and answers[4].error and answers[12].error
    history = json.loads(answers[-4].text)
    assert [v["actor"] for v in history["versions"]] == ["claude-code"]
    assert json.loads(answers[-3].text)["content"].startswith("# Project\nfirst\ngamma")
    assert answers[-2].error and "no history" in answers[-2].text
    found = json.loads(answers[-1].text)
    assert [r["path"] for r in found["results"]] == ["/memories/done.md"]
    assert "«gamma»" in found["results"][0]["snippet"]
    # The commits are in the data folder, for the CLI and the server alike.
    shown = memfs_cli("cat", agent, "done.md", data=data)
    assert shown.returncode == 0 and "gamma" in shown.stdout
    log = memfs_cli("log", agent, "--json", data=data)
    assert log.returncode == 0 and "claude-code" in log.stdout


def test_stdio_writes_nothing_but_mcp_frames_on_stdout(tmp_path: Path) -> None:
    data = tmp_path / "fresh"  # new: memfs mcp creates it and the agent, on stderr
    frames = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "create", "arguments": {"path": "/memories/a.md", "file_text": "hi"}},
        },
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "memfs.cli", "mcp", "--agent", "new/agent", "--data", str(data)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write("".join(json.dumps(f) + "\n" for f in frames))
        proc.stdin.flush()
        # A client keeps stdin open while it waits: closing it ends the session.
        lines = [proc.stdout.readline() for _ in range(3)]
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    replies = [json.loads(line) for line in [*lines, *out.splitlines()]]
    assert [r.get("id") for r in replies] == [1, 2, 3]
    assert replies[2]["result"]["content"][0]["text"] == "File created successfully at: /memories/a.md"
    assert "created agent new/agent" in err
    assert memfs_cli("cat", "new/agent", "a.md", data=data).stdout == "hi"


def test_stdio_against_a_server_uses_the_token_and_its_scopes(server: RealServer, tmp_path: Path) -> None:
    agent = "users/erin/assistant"
    make_agent(server, agent)
    writer = make_key(server, "erin-rw", "memories:read", "memories:write", "agents:users/erin")
    reader = make_key(server, "erin-ro", "memories:read", "agents:users/erin")
    nowhere = tmp_path / "never-created"

    def remote(key: str) -> StdioServerParameters:
        env = {**_env(), "MEMFS_TOKEN": key}
        return stdio(nowhere, agent, "--url", server.url, env=env)

    calls: list[Call] = [
        ("create", {"path": "/memories/r.md", "file_text": "remote\n"}),
        ("view", {"path": "/memories/r.md"}),
        ("history", {"path": "/memories/r.md"}),
        ("read_version", {"path": "/memories/r.md", "version": 1}),
        ("search", {"query": "remote"}),
        ("search", {"query": '"unbalanced'}),
    ]
    _, answers = session(remote(writer), calls)
    assert [a.error for a in answers] == [False, False, False, False, False, True]
    with api(server) as http:
        base = f"/v1/agents/{quote(agent, safe='')}"
        versions = http.get(f"{base}/versions", params={"path": "/memories/r.md"}).json()
        v1 = http.get(f"{base}/memories/r.md", params={"version": 1}).json()
        found = http.post(f"{base}/memory:query", json={"query": "remote"}).json()
    assert json.loads(answers[2].text) == versions
    assert json.loads(answers[4].text) == found and found["results"]
    assert "query" in answers[5].text
    assert versions["versions"][0]["actor"] == "key:erin-rw"
    assert json.loads(answers[3].text) == v1
    assert answers[1].text == command_api(server, agent, {"command": "view", "path": "/memories/r.md"}).text

    _, answers = session(remote(reader), [calls[0], calls[1]])
    assert answers[0].error and "memories:write" in answers[0].text
    assert not answers[1].error
    assert revision(server, agent) == 1
    assert not nowhere.exists()  # --url opens no data folder


def test_stdio_refuses_a_url_without_a_token(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memfs.cli", "mcp", "--agent", "a", "--url", "http://127.0.0.1:9"],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(),
        check=False,
    )
    assert done.returncode == 2 and "MEMFS_TOKEN" in done.stderr and done.stdout == ""
