"""Hostile input gets a clear 4xx and changes nothing; nothing a client sends is a 500.

- deeply nested JSON (and huge numbers) on every JSON route → 400, field ``body``,
  even from a key with no scopes;
- a trailing slash or an invalid percent escape in a memory path → 400; ``DELETE
  …/memories/notes/`` leaves the file ``notes`` alone;
- several ``webhook-signature`` header lines are all considered;
- ``PUT``/``GET``/``DELETE`` on ``:deliver`` → 405;
- deliveries to an unknown agent and to an unknown trigger answer the same 404 body.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from http_fixtures import AGENT, Api, agent_url, assert_error, memory_url, open_api
from memfs.domain.webhook_verify import sign


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with open_api(tmp_path) as opened:
        opened.create_agent()
        yield opened


JSON_ROUTES = [
    ("PUT", "/v1/tenant/keys/k1"),
    ("PUT", agent_url("users/bob")),
    ("PUT", agent_url(AGENT, "/memories/notes/a.md")),
    ("POST", agent_url(AGENT, "/memory:command")),
    ("POST", agent_url(AGENT, "/memory:inspect")),
    ("POST", "/v1/scopes/users/memory:inspect"),
    ("POST", agent_url(AGENT, "/memory:query")),
    ("POST", "/v1/scopes/users/memory:query"),
    ("PUT", agent_url(AGENT, "/triggers/t1")),
]
NESTED = [
    b"[" * 1000 + b"]" * 1000,
    b'{"a":' * 1000 + b"1" + b"}" * 1000,
    b'{"content": ' + b"[" * 30_000 + b"]" * 30_000 + b"}",
]


@pytest.mark.parametrize(("method", "url"), JSON_ROUTES)
def test_deeply_nested_json_is_a_400_on_every_json_route(api: Api, method: str, url: str) -> None:
    for body in [*NESTED, b'{"content": ' + b"9" * 5000 + b"}"]:
        response = api.call(method, url, content=body, headers={"Content-Type": "application/json"})
        assert_error(response, 400, "invalid_request", "body")
    # brackets inside strings are text, not nesting
    text = json.dumps({"command": "create", "path": "/memories/b.md", "file_text": "[" * 5000})
    ok = api.post(agent_url(AGENT, "/memory:command"), content=text.encode(),
                  headers={"Content-Type": "application/json"})  # fmt: skip
    assert ok.status_code == 200 and ok.json()["ok"], ok.text
    assert api.get(agent_url("users/bob")).status_code == 404  # nothing was created


def test_a_key_without_scopes_gets_a_400_not_a_500(api: Api) -> None:
    key = api.make_key("none", [])
    response = api.post(
        agent_url(AGENT, "/memory:command"),
        content=b"[" * 1000 + b"]" * 1000,
        headers={"Content-Type": "application/json"},
        auth=key,
    )
    assert_error(response, 400, "invalid_request", "body")


def test_trailing_slash_or_bad_escape_in_a_memory_path_is_a_400(api: Api) -> None:
    api.must_write("/memories/notes", "keep me\n")
    base = agent_url(AGENT, "/memories/notes")
    for method in ("DELETE", "PUT", "GET"):
        response = api.call(
            method, base + "/", content=b"x", headers={"Content-Type": "text/markdown"}
        )
        assert_error(response, 400, "invalid_request", "path")
    for bad in ("/memories/a%zz.md", "/memories/a%4.md", "/memories/100%.md"):
        response = api.call("PUT", agent_url(AGENT, bad), content=b"x",
                            headers={"Content-Type": "text/markdown"})  # fmt: skip
        assert_error(response, 400, "invalid_request", "path")
    assert api.get(memory_url("/memories/notes")).json()["content"] == "keep me\n"
    assert len(api.versions("/memories/notes")) == 1
    listed = api.get(agent_url(AGENT, "/memories")).json()["memories"]
    assert [m["path"] for m in listed] == ["/memories/notes"]


def _deliver(
    api: Api, agent: str, trigger: str, headers: list[tuple[str, str]], body: bytes
) -> Any:
    return api.client.request(
        "POST", f"{agent_url(agent)}/triggers/{trigger}:deliver", content=body, headers=headers
    )


def test_every_signature_header_line_is_considered(api: Api) -> None:
    secret = api.put(agent_url(AGENT, "/triggers/gh"), json={}).json()["secret"]
    stamp = int(time.time())
    body = b"{}"
    good = sign(secret, "msg_1", stamp, body)
    headers = [
        ("webhook-id", "msg_1"),
        ("webhook-timestamp", str(stamp)),
        ("webhook-signature", "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="),
        ("webhook-signature", good),
    ]
    response = _deliver(api, AGENT, "gh", headers, body)
    assert response.status_code == 202, response.text
    # the good line first, another after it: still considered
    headers[0] = ("webhook-id", "msg_2")
    good = sign(secret, "msg_2", stamp, body)
    headers[2:] = [("webhook-signature", good), ("webhook-signature", "v1,bm9wZQ==")]
    response = _deliver(api, AGENT, "gh", headers, body)
    assert response.status_code == 202, response.text


def test_only_post_on_deliver(api: Api) -> None:
    api.put(agent_url(AGENT, "/triggers/gh"), json={})
    for method in ("PUT", "GET", "DELETE"):
        response = api.call(method, agent_url(AGENT, "/triggers/gh:deliver"), json={})
        assert response.status_code == 405, (method, response.text)
        assert response.json()["code"] == "method_not_allowed" or response.status_code == 405
    assert api.get(agent_url(AGENT, "/triggers")).json()["triggers"][0]["triggerId"] == "gh"
    assert len(api.get(agent_url(AGENT, "/triggers")).json()["triggers"]) == 1


def test_unknown_agent_and_unknown_trigger_answer_the_same_404(api: Api) -> None:
    api.put(agent_url(AGENT, "/triggers/gh"), json={})
    headers = [("webhook-id", "m"), ("webhook-timestamp", "1"), ("webhook-signature", "v1,x")]
    unknown_agent = _deliver(api, "users/nobody-here", "gh", headers, b"{}")
    unknown_trigger = _deliver(api, AGENT, "nope", headers, b"{}")
    assert unknown_agent.status_code == unknown_trigger.status_code == 404
    first, second = unknown_agent.json(), unknown_trigger.json()
    for doc in (first, second):
        doc["details"].pop("requestId")
    assert first == second
    assert "nobody-here" not in unknown_agent.text


@pytest.mark.parametrize(
    "body",
    [
        '{"query": "\\ud800"}',
        '{"query": "a", "pathPrefix": "\\udfff"}',
        '{"query": "a", "metadata": {"\\ud800": "v"}}',
        '{"query": "a", "metadata": {"k": "\\ud800"}}',
        '{"query": "a\\u0000b"}',
        '{"query": "a", "metadata": {"k": 1e400}}',
        '{"query": "a", "limit": 1e400}',
        '{"query": "a", "limit": 99999999999999999999999999}',
    ],
)
def test_a_hostile_search_body_is_a_400_never_a_500(api: Api, body: str) -> None:
    for url in (agent_url(AGENT, "/memory:query"), "/v1/scopes/users/memory:query"):
        response = api.post(url, content=body.encode(), headers={"Content-Type": "application/json"})
        assert response.status_code in (200, 400), response.text
        if response.status_code == 400:
            assert_error(response, 400, "invalid_request")
