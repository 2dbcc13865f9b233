"""memory:query over HTTP: the answer's shape, paging, scopes, refusals, and the index
kept as derived state (same transaction as the commit, reindex, fsck, erasure)."""

from __future__ import annotations

import os
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from http_fixtures import AGENT, Api, agent_url, assert_error, open_api, sha
from memfs.core import maintenance

SCOPE_URL = "/v1/scopes/users/memory:query"


@pytest.fixture(params=["sqlite", "postgresql"])
def api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Api]:
    """The HTTP API on the SQLite index, and on the PostgreSQL index (MEMFS_INDEX)."""
    index = None
    if request.param == "postgresql":
        index = request.getfixturevalue("postgres_server").new_database()
    with open_api(tmp_path, index=index) as opened:
        opened.create_agent()
        yield opened


@pytest.fixture
def lite_api(tmp_path: Path) -> Iterator[Api]:
    """On the SQLite index only: for the tests that read or damage its file."""
    with open_api(tmp_path) as opened:
        opened.create_agent()
        yield opened


def query(api: Api, body: dict[str, Any], url: str | None = None, **kw: Any) -> dict[str, Any]:
    response = api.post(url or agent_url(AGENT, "/memory:query"), json=body, **kw)
    assert response.status_code == 200, response.text
    page: dict[str, Any] = response.json()
    return page


def paths_of(page: dict[str, Any]) -> list[str]:
    return [r["path"] for r in page["results"]]


def test_a_result_has_the_documented_fields_and_a_marked_snippet(api: Api) -> None:
    text = "---\ndescription: Deploy checklist\n---\nAlways run the migrations before a deploy.\n"
    written = api.must_write("/memories/ops/deploy.md", text)
    page = query(api, {"query": "migrations"})
    assert page["nextPageToken"] == ""
    (hit,) = page["results"]
    assert set(hit) == {
        "agentId", "path", "version", "contentSha256", "description", "updatedAt", "score",
        "snippet",
    }  # fmt: skip
    assert hit["agentId"] == AGENT and hit["path"] == "/memories/ops/deploy.md"
    assert hit["version"] == 1 and hit["contentSha256"] == sha(text)
    assert hit["description"] == "Deploy checklist"
    assert hit["updatedAt"] == written["updatedAt"]
    assert isinstance(hit["score"], float) and hit["score"] > 0
    assert hit["snippet"] == "Always run the «migrations» before a deploy."


def test_a_write_is_searchable_at_once_and_a_delete_or_rename_at_once_too(api: Api) -> None:
    api.must_write("/memories/a.md", "the walrus sleeps\n")
    assert paths_of(query(api, {"query": "walrus"})) == ["/memories/a.md"]
    api.must_write("/memories/a.md", "the seal sleeps\n")
    assert paths_of(query(api, {"query": "walrus"})) == []
    assert paths_of(query(api, {"query": "seal"})) == ["/memories/a.md"]
    rename = {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"}
    assert api.post(agent_url(AGENT, "/memory:command"), json=rename).json()["ok"]
    assert paths_of(query(api, {"query": "seal"})) == ["/memories/b.md"]
    assert api.delete(agent_url(AGENT, "/memories/b.md")).status_code == 204
    assert paths_of(query(api, {"query": "seal"})) == []


def test_limit_defaults_to_10_is_at_most_50_and_tokens_page_to_an_empty_token(api: Api) -> None:
    for i in range(60):
        api.must_write(f"/memories/n{i:02}.md", f"common word number {i}\n")
    assert len(query(api, {"query": "common"})["results"]) == 10
    big = query(api, {"query": "common", "limit": 500})
    assert len(big["results"]) == 50 and big["nextPageToken"]
    seen: list[str] = []
    token = ""
    while True:
        page = query(api, {"query": "common", "limit": 25, "pageToken": token})
        seen += paths_of(page)
        token = page["nextPageToken"]
        if not token:
            break
    assert sorted(seen) == [f"/memories/n{i:02}.md" for i in range(60)]
    assert len(set(seen)) == 60


def test_a_page_token_is_bound_to_its_query_and_target(api: Api) -> None:
    for i in range(3):
        api.must_write(f"/memories/n{i}.md", f"otter {i}\n")
    token = query(api, {"query": "otter", "limit": 1})["nextPageToken"]
    assert token
    for body, url in [
        ({"query": "otters"}, None),  # another query (even one with the same stem)
        ({"query": "otter", "pathPrefix": "x"}, None),
        ({"query": "otter", "metadata": {"k": "v"}}, None),
        ({"query": "otter"}, SCOPE_URL),  # another target
    ]:
        response = api.post(
            url or agent_url(AGENT, "/memory:query"), json={**body, "pageToken": token}
        )
        assert_error(response, 400, "invalid_request", "pageToken")
    altered = token[:-3] + ("AAA" if not token.endswith("AAA") else "BBB")
    response = api.post(
        agent_url(AGENT, "/memory:query"), json={"query": "otter", "pageToken": altered}
    )
    assert_error(response, 400, "invalid_request", "pageToken")


def test_a_scope_query_ranks_all_agents_under_it_in_one_list(api: Api) -> None:
    api.create_agent("users/bob/assistant")
    api.create_agent("usersx")  # shares a prefix, not the scope
    api.must_write("/memories/a.md", "---\ndescription: narwhal facts\n---\nnarwhal\n")
    api.must_write("/memories/b.md", "a narwhal once\n", agent_id="users/bob/assistant")
    api.must_write("/memories/c.md", "narwhal\n", agent_id="usersx")
    page = query(api, {"query": "narwhal"}, SCOPE_URL)
    assert [(r["agentId"], r["path"]) for r in page["results"]] == [
        (AGENT, "/memories/a.md"),  # the description weighs more
        ("users/bob/assistant", "/memories/b.md"),
    ]
    scores = [r["score"] for r in page["results"]]
    assert scores == sorted(scores, reverse=True)
    assert query(api, {"query": "narwhal"}, "/v1/scopes/nobody/memory:query")["results"] == []


def test_path_prefix_and_metadata_filter_the_results(api: Api) -> None:
    api.must_write("/memories/rules/a.md", "---\nkind: rule\nlevel: 2\n---\nbeaver\n")
    api.must_write("/memories/rules/b.md", "---\nkind: fact\n---\nbeaver\n")
    api.must_write("/memories/other/c.md", "---\nkind: rule\n---\nbeaver\n")
    assert sorted(paths_of(query(api, {"query": "beaver", "pathPrefix": "rules"}))) == [
        "/memories/rules/a.md",
        "/memories/rules/b.md",
    ]
    both = {"query": "beaver", "pathPrefix": "/memories/rules", "metadata": {"kind": "rule"}}
    assert paths_of(query(api, both)) == ["/memories/rules/a.md"]
    assert paths_of(query(api, {"query": "beaver", "metadata": {"level": 2}})) == [
        "/memories/rules/a.md"
    ]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "query"),
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "x" * 1025}, "query"),
        ({"query": '"open phrase'}, "query"),
        ({"query": "-only -exclusions"}, "query"),
        ({"query": 42}, "query"),
        ({"query": ["a"]}, "query"),
        ({"query": "a", "limit": 0}, "limit"),
        ({"query": "a", "limit": "10"}, "limit"),
        ({"query": "a", "limit": True}, "limit"),
        ({"query": "a", "limit": 1.5}, "limit"),
        ({"query": "a", "pageToken": "nope"}, "pageToken"),
        ({"query": "a", "pageToken": 7}, "pageToken"),
        ({"query": "a", "metadata": ["k"]}, "metadata"),
        ({"query": "a", "metadata": {"k": {"nested": 1}}}, "metadata"),
        ({"query": "a", "metadata": {"k": [1]}}, "metadata"),
        ({"query": "a", "metadata": {"": "v"}}, "metadata"),
        ({"query": "a", "metadata": {f"k{i}": "v" for i in range(33)}}, "metadata"),
        ({"query": "a", "pathPrefix": 3}, "pathPrefix"),
        ({"query": "a", "pathPrefix": "../../etc"}, "pathPrefix"),
        ({"query": "a", "sort": "date"}, "sort"),
    ],
)
def test_bad_requests_are_a_400_naming_the_field_at_fault(
    api: Api, body: dict[str, Any], field: str
) -> None:
    api.must_write("/memories/a.md", "a thing\n")
    for url in (agent_url(AGENT, "/memory:query"), SCOPE_URL):
        assert_error(api.post(url, json=body), 400, "invalid_request", field)


def test_a_body_that_is_not_a_json_object_is_a_400(api: Api) -> None:
    url = agent_url(AGENT, "/memory:query")
    assert_error(
        api.post(url, content=b"[1]", headers={"Content-Type": "application/json"}),
        400,
        "invalid_request",
        "body",
    )
    assert_error(
        api.post(url, content=b"query=x", headers={"Content-Type": "text/plain"}),
        400,
        "invalid_request",
    )


def test_keys_need_memories_read_and_a_scope_that_covers_the_target(api: Api) -> None:
    api.create_agent("users/bob/assistant")
    api.must_write("/memories/a.md", "heron\n")
    alice = api.make_key("alice", ["memories:read", "agents:users/alice"])
    writer = api.make_key("writer", ["memories:write", "agents:users"])
    body = {"query": "heron"}
    assert paths_of(query(api, body, auth=alice)) == ["/memories/a.md"]
    assert paths_of(query(api, body, "/v1/scopes/users%2Falice/memory:query", auth=alice)) == [
        "/memories/a.md"
    ]
    bob = agent_url("users/bob/assistant", "/memory:query")
    assert_error(api.post(bob, json=body, auth=alice), 403, "forbidden")
    assert_error(api.post(SCOPE_URL, json=body, auth=alice), 403, "forbidden")
    assert_error(
        api.post(agent_url(AGENT, "/memory:query"), json=body, auth=writer), 403, "forbidden"
    )
    assert_error(
        api.post(agent_url(AGENT, "/memory:query"), json=body, auth=None), 401, "unauthorized"
    )
    narrowed = {"Memfs-Subject": "bob", "Memfs-Scopes": "memories:read agents:users/bob"}
    admin_as_bob = api.post(agent_url(AGENT, "/memory:query"), json=body, headers=narrowed)
    assert_error(admin_as_bob, 403, "forbidden")


def test_an_unknown_agent_is_a_404(api: Api) -> None:
    response = api.post(agent_url("users/nobody", "/memory:query"), json={"query": "x"})
    assert_error(response, 404, "not_found")


# ---- derived state: reindex, fsck, erasure ------------------------------------------


def _fts_rows(data: Path) -> int:
    conn = sqlite3.connect(data / "index.sqlite")
    try:
        return int(conn.execute("SELECT count(*) FROM search_fts").fetchone()[0])
    finally:
        conn.close()


def test_fsck_reports_a_missing_or_stale_full_text_row_and_reindex_rebuilds_it(
    lite_api: Api,
) -> None:
    api = lite_api
    api.must_write("/memories/a.md", "puffin\n")
    api.must_write("/memories/b.md", "gannet\n")
    store = api.app.services.store
    assert fsck_derived(store) == []
    # A search makes the full-text rows the commits left pending (search.flush).
    assert paths_of(query(api, {"query": "puffin"})) == ["/memories/a.md"]
    with store.index.write() as conn:  # damage the derived state by hand
        conn.execute(
            "DELETE FROM search_fts WHERE rowid=(SELECT doc FROM search_docs WHERE path=?)",
            ("/memories/a.md",),
        )
        conn.execute("UPDATE search_docs SET sha256='0' WHERE path='/memories/b.md'")
    assert paths_of(query(api, {"query": "puffin"})) == []
    problems = fsck_derived(store)
    assert len(problems) == 2
    assert "missing (first: /memories/a.md)" in problems[0] and "memfs reindex" in problems[0]
    assert "stale (first: /memories/b.md)" in problems[1] and "memfs reindex" in problems[1]
    maintenance.reindex(store)
    assert fsck_derived(store) == []
    assert paths_of(query(api, {"query": "puffin"})) == ["/memories/a.md"]
    assert paths_of(query(api, {"query": "gannet"})) == ["/memories/b.md"]


def fsck_derived(store: Any) -> list[str]:
    return [p for p in maintenance.fsck(store).derived if "full-text" in p]


def test_an_erased_agent_leaves_no_word_in_the_full_text_index(lite_api: Api) -> None:
    api = lite_api
    word = f"zq{secrets.token_hex(8)}"  # one token, as the index stores it
    api.create_agent("users/bob/assistant")
    api.must_write("/memories/keep.md", "kept words\n", agent_id="users/bob/assistant")
    for i in range(3):
        api.must_write(f"/memories/m{i}.md", f"{word} secret {i}\n")
    store = api.app.services.store
    store.index.checkpoint()
    assert any(word.encode() in p.read_bytes() for p in _files(api.data))
    assert api.delete(agent_url(AGENT)).status_code == 204
    assert [str(p) for p in _files(api.data) if word.encode() in p.read_bytes()] == []
    assert _fts_rows(api.data) == 1
    page = query(api, {"query": "kept"}, SCOPE_URL)
    assert paths_of(page) == ["/memories/keep.md"]


def _files(data: Path) -> list[Path]:
    return [Path(d) / n for d, _dirs, names in os.walk(data) for n in names]
