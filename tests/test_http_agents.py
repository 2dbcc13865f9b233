"""Agents over HTTP (design §3 "Agents" and §2 agent ids)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from http_fixtures import (
    AGENT,
    Api,
    agent_url,
    assert_error,
    memory_url,
    open_api,
)


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with open_api(tmp_path, page_items=5) as opened:
        yield opened


def test_put_creates_then_renames_then_is_idempotent(api: Api) -> None:
    created = api.put(agent_url(), json={"name": "Alice's assistant"})
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["agentId"] == AGENT
    assert body["name"] == "Alice's assistant"
    assert body["revision"] == 0
    assert body["createdAt"].endswith("Z")
    store_id = body["memoryStoreId"]

    renamed = api.put(agent_url(), json={"name": "Assistant"})
    assert renamed.status_code == 200, renamed.text
    assert renamed.json()["name"] == "Assistant"
    assert renamed.json()["revision"] == 1
    assert renamed.json()["memoryStoreId"] == store_id
    assert renamed.json()["createdAt"] == body["createdAt"]

    again = api.put(agent_url(), json={"name": "Assistant"})
    assert again.status_code == 200
    assert again.json() == renamed.json()  # no new revision

    fetched = api.get(agent_url())
    assert fetched.status_code == 200
    assert fetched.json() == renamed.json()


def test_put_without_name_uses_the_id(api: Api) -> None:
    created = api.put(agent_url("solo"), json={})
    assert created.status_code == 201
    assert created.json()["name"] == "solo"


def test_put_refuses_a_bad_name(api: Api) -> None:
    for name in ("", "   ", "a\nb", "x" * 257, 5, None):
        response = api.put(agent_url(), json={"name": name})
        assert_error(response, 400, "invalid_request", field="name")
    assert api.get(agent_url()).status_code == 404
    api.create_agent(name="Good")
    response = api.put(agent_url(), json={"name": "bad\u0007name"})
    assert_error(response, 400, "invalid_request", field="name")
    assert api.get(agent_url()).json()["name"] == "Good"


def test_percent_encoded_slashes_route_on_the_raw_path(api: Api) -> None:
    api.create_agent("users/alice/assistant")
    # %2F keeps the id one segment: these must not be confused with sub-routes.
    assert api.get("/v1/agents/users%2Falice%2Fassistant").json()["agentId"] == AGENT
    lower = api.get("/v1/agents/users%2falice%2fassistant")
    assert lower.status_code == 200 and lower.json()["agentId"] == AGENT
    # Unencoded slashes are not an agent id.
    assert_error(api.get("/v1/agents/users/alice/assistant"), 404, "not_found")
    # The memory routes see the same id.
    assert api.write("/memories/a.md", "a").status_code == 201
    listing = api.get("/v1/agents/users%2Falice%2Fassistant/memories").json()
    assert [m["path"] for m in listing["memories"]] == ["/memories/a.md"]
    # An agent whose id looks like a route word still routes.
    api.create_agent("memories")
    assert api.get(agent_url("memories", "/memories")).json()["memories"] == []


INVALID_IDS = [
    "a%2F%2Fb",  # empty segment
    "%2Fa",  # leading slash
    "a%2F",  # trailing slash
    "a%2F..%2Fb",  # '..' segment
    "a%2F.%2Fb",  # '.' segment
    "%2E%2E",  # '..' itself (encoded: clients resolve a bare '..')
    "%2E",
    "bad%20id",
    "caf%C3%A9",
    "a%5Cb",
    "a%00b",
    "%FF",  # not UTF-8
    "x" * 257,
]


def test_invalid_agent_ids_are_400(api: Api) -> None:
    for raw in INVALID_IDS:
        created = api.put(f"/v1/agents/{raw}", json={"name": "x"})
        assert_error(created, 400, "invalid_request")
        assert_error(api.get(f"/v1/agents/{raw}"), 400, "invalid_request")
        written = api.put(
            f"/v1/agents/{raw}/memories/a.md",
            content=b"a",
            headers={"Content-Type": "text/markdown"},
        )
        assert_error(written, 400, "invalid_request")
    assert api.get("/v1/agents").json()["agents"] == []
    assert not (api.data / "agents").exists() or not list((api.data / "agents").iterdir())


def test_list_pages_with_prefix_limit_and_cursor_to_the_end(api: Api) -> None:
    ids = [f"team/a{i:02d}" for i in range(7)] + ["team2/x", "other/y", "team"]
    for agent_id in ids:
        api.create_agent(agent_id)

    # pageItems (5) is the default limit; a full last page still says nothing follows.
    everything = api.walk("/v1/agents", "agents", {})
    assert [len(p["agents"]) for p in everything] == [5, 5]
    assert [a["agentId"] for p in everything for a in p["agents"]] == sorted(ids)

    pages = api.walk("/v1/agents", "agents", {"prefix": "team/", "limit": "3"})
    assert [len(p["agents"]) for p in pages] == [3, 3, 1]
    walked = [a["agentId"] for p in pages for a in p["agents"]]
    assert walked == [f"team/a{i:02d}" for i in range(7)]
    assert all(p["nextCursor"] for p in pages[:-1])
    assert pages[-1]["nextCursor"] is None

    exact = api.walk("/v1/agents", "agents", {"prefix": "team/a0", "limit": "4"})
    assert [len(p["agents"]) for p in exact] == [4, 3]
    assert exact[-1]["nextCursor"] is None


def test_list_cursor_is_bound_to_its_prefix_and_tamper_evident(api: Api) -> None:
    for i in range(3):
        api.create_agent(f"p/a{i}")
    cursor = api.get("/v1/agents", params={"prefix": "p/", "limit": "1"}).json()["nextCursor"]
    other = api.get("/v1/agents", params={"prefix": "q/", "cursor": cursor})
    assert_error(other, 400, "invalid_request", field="cursor")
    altered = cursor[:-2] + ("AA" if not cursor.endswith("AA") else "BB")
    assert_error(
        api.get("/v1/agents", params={"prefix": "p/", "cursor": altered}),
        400,
        "invalid_request",
        field="cursor",
    )
    assert_error(
        api.get("/v1/agents", params={"prefix": "p/", "cursor": "garbage"}),
        400,
        "invalid_request",
        field="cursor",
    )
    follow = api.get("/v1/agents", params={"prefix": "p/", "cursor": cursor, "limit": "5"})
    assert [a["agentId"] for a in follow.json()["agents"]] == ["p/a1", "p/a2"]


def test_list_refuses_a_bad_limit(api: Api) -> None:
    for limit in ("0", "-1", "x", "1.5"):
        response = api.get("/v1/agents", params={"limit": limit})
        assert_error(response, 400, "invalid_request", field="limit")


def test_list_coerces_a_large_limit_to_page_items(api: Api) -> None:
    for i in range(6):
        api.create_agent(f"bulk/a{i:02d}")
    page = api.get("/v1/agents", params={"limit": "100000"}).json()
    assert len(page["agents"]) == 5
    assert page["nextCursor"] is not None


def test_delete_erases_the_agent_and_its_history(api: Api) -> None:
    api.create_agent(name="Original")
    api.must_write("/memories/a.md", "secret stuff")
    api.must_write("/memories/a.md", "more secret stuff")
    folder = next((api.data / "agents").iterdir())

    response = api.delete(agent_url())
    assert response.status_code == 204
    assert response.content == b""
    assert_error(api.get(agent_url()), 404, "not_found")
    assert_error(api.get(memory_url("/memories/a.md")), 404, "not_found")
    assert_error(api.get(agent_url(rest="/memories")), 404, "not_found")
    assert_error(api.delete(agent_url()), 404, "not_found")
    assert not folder.exists()

    # A new agent under the same id starts empty: no memory, no history.
    again = api.create_agent()
    assert again["revision"] == 0
    assert again["name"] == AGENT
    assert api.get(agent_url(rest="/memories")).json()["memories"] == []
    old = api.get(memory_url("/memories/a.md"), params={"version": "1"})
    assert_error(old, 404, "not_found")


def test_get_unknown_agent_is_404(api: Api) -> None:
    assert_error(api.get(agent_url("users/ghost")), 404, "not_found", field="agentId")


def test_writing_to_an_unknown_agent_says_how_to_create_it(api: Api) -> None:
    response = api.write("/memories/a.md", "x", agent_id="users/ghost")
    body = assert_error(response, 404, "not_found", field="agentId")
    assert "users/ghost" in body["message"]
    assert "PUT /v1/agents/" in body["message"]
    command = {"command": "create", "path": "/memories/a.md", "file_text": "x"}
    tool = api.post(agent_url("users/ghost", "/memory:command"), json=command)
    assert "PUT /v1/agents/" in assert_error(tool, 404, "not_found")["message"]
    assert api.get(agent_url("users/ghost")).status_code == 404


def test_renaming_an_agent_keeps_its_summary_state(api: Api) -> None:
    api.create_agent(name="Before")
    assert api.get(agent_url(AGENT, "/memory")).json()["state"] == "waiting"
    assert api.put(agent_url(), json={"name": "After"}).status_code == 200
    summary = api.get(agent_url(AGENT, "/memory")).json()
    # The rename is a revision of its own, yet the agent has still no memory and no run.
    assert (summary["state"], summary["revision"], summary["agentName"]) == (
        "waiting",
        1,
        "After",
    )
    api.write("/memories/a.md", "x")
    assert api.get(agent_url(AGENT, "/memory")).json()["state"] == "idle"
    assert api.put(agent_url(), json={"name": "Again"}).status_code == 200
    assert api.get(agent_url(AGENT, "/memory")).json()["state"] == "idle"


def test_the_summary_counts_follow_every_commit_and_a_remade_agent(api: Api) -> None:
    """The counts are remembered per revision: each commit, and an agent erased and
    made again at the same revision, must show the new counts."""
    api.create_agent()
    url = agent_url(rest="/memory")
    api.must_write("/memories/a.md", "aa")
    assert api.get(url).json()["memoryCount"] == 1
    assert api.get(url).json()["memoryCount"] == 1  # read again, no commit between
    api.must_write("/memories/b.md", "bbbb")
    assert (api.get(url).json()["memoryCount"], api.get(url).json()["totalBytes"]) == (2, 6)
    assert api.delete(agent_url()).status_code == 204
    api.create_agent()
    api.must_write("/memories/c.md", "c")
    api.must_write("/memories/d.md", "dddddddddd")  # revision 2 again, other memories
    body = api.get(url).json()
    assert (body["revision"], body["memoryCount"], body["totalBytes"]) == (2, 2, 11)
