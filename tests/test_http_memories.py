"""Memories over HTTP (design §2 paths/content, §3 "Memories", summary, memory:command)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from http_fixtures import (
    AGENT,
    Api,
    agent_url,
    assert_error,
    memory_url,
    open_api,
    sha,
)

PAGE_ITEMS = 5
MEMORY_BYTES = 4096
LIST = agent_url(rest="/memories")
LISTING_FIELDS = {"path", "bytes", "contentSha256", "description", "version", "updatedAt"}
MEMORY_FIELDS = {
    "path",
    "content",
    "bytes",
    "contentSha256",
    "description",
    "metadata",
    "version",
    "createdAt",
    "updatedAt",
}
VERSION_FIELDS = {
    "version",
    "operation",
    "contentSha256",
    "bytes",
    "revision",
    "validFrom",
    "validTo",
    "actor",
    "message",
}


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with open_api(tmp_path, page_items=PAGE_ITEMS, memory_bytes=MEMORY_BYTES) as opened:
        opened.create_agent()
        yield opened


def _paths(api: Api, **params: str) -> list[str]:
    """Every memory path of a listing, walking all pages."""
    pages = api.walk(LIST, "memories", params)
    return [m["path"] for p in pages for m in p["memories"]]


def _revision(api: Api) -> int:
    revision: int = api.get(agent_url()).json()["revision"]
    return revision


# ---- listing -----------------------------------------------------------------------


def test_listing_fields_and_shape(api: Api) -> None:
    api.must_write("/memories/a.md", "---\ndescription: first one\n---\nbody\n")
    body = api.get(LIST).json()
    assert set(body) == {"memories", "folders", "nextCursor"}
    assert body["folders"] == [] and body["nextCursor"] is None
    [item] = body["memories"]
    assert set(item) == LISTING_FIELDS
    content = "---\ndescription: first one\n---\nbody\n"
    assert item["path"] == "/memories/a.md"
    assert item["bytes"] == len(content.encode())
    assert item["contentSha256"] == sha(content)
    assert item["description"] == "first one"
    assert item["version"] == 1
    assert item["updatedAt"].endswith("Z") and "." in item["updatedAt"]


def test_path_prefix_keeps_one_folder(api: Api) -> None:
    for path in (
        "/memories/conventions/naming.md",
        "/memories/conventions/style/tabs.md",
        "/memories/conventions2/other.md",
        "/memories/conventions.md",
        "/memories/conventions-old/x.md",
        "/memories/top.md",
    ):
        api.must_write(path, path)
    expected = ["/memories/conventions/naming.md", "/memories/conventions/style/tabs.md"]
    for prefix in (
        "conventions",
        "conventions/",
        "/memories/conventions",
        "/memories/conventions/",
    ):
        assert _paths(api, pathPrefix=prefix) == expected, prefix
    assert _paths(api, pathPrefix="conventions/style") == ["/memories/conventions/style/tabs.md"]
    assert _paths(api, pathPrefix="conv") == []
    assert _paths(api, pathPrefix="top.md") == []
    assert len(_paths(api, pathPrefix="/memories")) == 6
    assert len(_paths(api)) == 6
    for bad in ("/elsewhere", "a/../b", "a//b", "a\\b"):
        response = api.get(LIST, params={"pathPrefix": bad})
        assert_error(response, 400, "invalid_request", field="pathPrefix")


def test_listing_is_in_bytewise_order(api: Api) -> None:
    names = ["b.md", "B.md", "a.md", "é.md", "z.md", "a-b.md", "a_b.md", "日本.md"]
    for name in names:
        api.must_write(f"/memories/{name}", name)
    got = _paths(api)
    assert got == sorted((f"/memories/{n}" for n in names), key=lambda p: p.encode())
    assert "/memories/B.md" in got and "/memories/b.md" in got  # case-sensitive


def test_limit_is_coerced_to_page_items_and_bad_limits_are_400(api: Api) -> None:
    for i in range(PAGE_ITEMS + 2):
        api.must_write(f"/memories/n{i}.md", str(i))
    for limit in (str(PAGE_ITEMS + 1), "100000", None):
        params = {} if limit is None else {"limit": limit}
        page = api.get(LIST, params=params).json()
        assert len(page["memories"]) == PAGE_ITEMS
        assert page["nextCursor"] is not None
    assert len(api.get(LIST, params={"limit": "2"}).json()["memories"]) == 2
    for bad in ("0", "-1", "x", "1.5", "1e3", " 2"):
        response = api.get(LIST, params={"limit": bad})
        assert_error(response, 400, "invalid_request", field="limit")


def test_next_cursor_is_null_exactly_at_the_end(api: Api) -> None:
    for i in range(4):
        api.must_write(f"/memories/n{i}.md", str(i))
    exact = api.get(LIST, params={"limit": "4"}).json()
    assert len(exact["memories"]) == 4 and exact["nextCursor"] is None
    pages = api.walk(LIST, "memories", {"limit": "2"})
    assert [len(p["memories"]) for p in pages] == [2, 2]
    pages = api.walk(LIST, "memories", {"limit": "3"})
    assert [len(p["memories"]) for p in pages] == [3, 1]
    assert api.get(LIST, params={"pathPrefix": "empty"}).json() == {
        "memories": [],
        "folders": [],
        "nextCursor": None,
    }


def test_depth_one_merges_files_and_folders_under_one_cursor(api: Api) -> None:
    for path in (
        "/memories/a.md",
        "/memories/a/x.md",
        "/memories/a/y/z.md",
        "/memories/a0.md",
        "/memories/a-b/c.md",
        "/memories/b.md",
        "/memories/sub/deep/er.md",
    ):
        api.must_write(path, path)
    # Like ls: direct files, plus folders; deeper files stay out.
    pages = api.walk(LIST, "memories", {"depth": "1"})
    assert [m["path"] for p in pages for m in p["memories"]] == [
        "/memories/a.md",
        "/memories/a0.md",
        "/memories/b.md",
    ]
    assert sorted(f for p in pages for f in p["folders"]) == [
        "/memories/a",
        "/memories/a-b",
        "/memories/sub",
    ]
    # One entry per page: files and folders come in one order ("name/" for a folder).
    walked = []
    for page in api.walk(LIST, "memories", {"depth": "1", "limit": "1"}):
        assert len(page["memories"]) + len(page["folders"]) == 1
        walked += [m["path"] for m in page["memories"]] + [f + "/" for f in page["folders"]]
    assert walked == [
        "/memories/a-b/",
        "/memories/a.md",
        "/memories/a/",
        "/memories/a0.md",
        "/memories/b.md",
        "/memories/sub/",
    ]
    # A page counts files and folders together against the limit.
    first = api.get(LIST, params={"depth": "1", "limit": "3"}).json()
    assert len(first["memories"]) + len(first["folders"]) == 3
    inner = api.get(LIST, params={"depth": "1", "pathPrefix": "a"}).json()
    assert [m["path"] for m in inner["memories"]] == ["/memories/a/x.md"]
    assert inner["folders"] == ["/memories/a/y"]
    for bad in ("0", "2", "all"):
        assert_error(api.get(LIST, params={"depth": bad}), 400, "invalid_request", field="depth")


def test_metadata_filter_and_include_total(api: Api) -> None:
    notes = {
        "/memories/n1.md": "---\nkind: note\npriority: 1\n---\nx\n",
        "/memories/n2.md": "---\nkind: note\ndone: true\n---\ny\n",
        "/memories/t1.md": "---\nkind: task\npriority: 1\n---\nz\n",
        "/memories/sub/n3.md": "---\nkind: note\n---\nw\n",
        "/memories/plain.md": "no frontmatter, kind: note\n",
    }
    for path, text in notes.items():
        api.must_write(path, text)
    assert _paths(api, **{"metadata.kind": "note"}) == [
        "/memories/n1.md",
        "/memories/n2.md",
        "/memories/sub/n3.md",
    ]
    assert _paths(api, **{"metadata.kind": "note", "metadata.priority": "1"}) == ["/memories/n1.md"]
    assert _paths(api, **{"metadata.done": "true"}) == ["/memories/n2.md"]
    assert _paths(api, **{"metadata.kind": "Note"}) == []
    assert _paths(api, **{"metadata.kind": "note", "pathPrefix": "sub"}) == ["/memories/sub/n3.md"]

    first = api.get(LIST, params={"metadata.kind": "note", "limit": "1", "includeTotal": "true"})
    assert first.json()["total"] == 3
    assert len(first.json()["memories"]) == 1
    assert "total" not in api.get(LIST).json()
    assert "total" not in api.get(LIST, params={"includeTotal": "false"}).json()
    assert api.get(LIST, params={"includeTotal": "true"}).json()["total"] == 5
    depth = api.get(LIST, params={"includeTotal": "true", "depth": "1"}).json()
    assert depth["total"] == 5  # four files and one folder
    bad = api.get(LIST, params={"includeTotal": "yes"})
    assert_error(bad, 400, "invalid_request", field="includeTotal")
    assert_error(api.get(LIST, params={"metadata.": "x"}), 400, "invalid_request")


def test_cursor_is_signed_and_bound_to_agent_and_query(api: Api) -> None:
    api.create_agent("users/bob")
    for i in range(4):
        api.must_write(f"/memories/f/n{i}.md", str(i))
        api.must_write(f"/memories/f/n{i}.md", str(i), agent_id="users/bob")
    query = {"pathPrefix": "f", "limit": "2"}
    cursor = api.get(LIST, params=query).json()["nextCursor"]
    assert cursor

    follow = api.get(LIST, params={**query, "cursor": cursor})
    assert [m["path"] for m in follow.json()["memories"]] == [
        "/memories/f/n2.md",
        "/memories/f/n3.md",
    ]

    body, mac = cursor.split(".")
    flipped = body[:-1] + ("A" if body[-1] != "A" else "B")
    # The first character carries six whole bits of the MAC (the last also holds padding).
    altered_mac = ("A" if mac[0] != "A" else "B") + mac[1:]
    attempts = {
        "altered payload": (LIST, {**query, "cursor": f"{flipped}.{mac}"}),
        "altered mac": (LIST, {**query, "cursor": f"{body}.{altered_mac}"}),
        "not a cursor": (LIST, {**query, "cursor": "hello"}),
        "other agent": (agent_url("users/bob", "/memories"), {**query, "cursor": cursor}),
        "other prefix": (LIST, {"pathPrefix": "g", "limit": "2", "cursor": cursor}),
        "other depth": (LIST, {**query, "depth": "1", "cursor": cursor}),
        "other filter": (LIST, {**query, "metadata.k": "v", "cursor": cursor}),
        "versions route": (
            agent_url(rest="/versions"),
            {"path": "/memories/f/n0.md", "cursor": cursor},
        ),
    }
    for name, (url, params) in attempts.items():
        response = api.get(url, params=params)
        assert response.status_code == 400, name
        assert_error(response, 400, "invalid_request", field="cursor")


def test_a_walk_never_repeats_or_skips_unchanged_entries(api: Api) -> None:
    for name in "bdfh":
        api.must_write(f"/memories/{name}.md", name)
    first = api.get(LIST, params={"limit": "2"}).json()
    assert [m["path"] for m in first["memories"]] == ["/memories/b.md", "/memories/d.md"]
    # Between pages: delete a returned entry, add one before and one after the cursor.
    assert api.delete(memory_url("/memories/b.md")).status_code == 204
    api.must_write("/memories/a.md", "a")
    api.must_write("/memories/g.md", "g")
    rest = api.get(LIST, params={"limit": "5", "cursor": first["nextCursor"]}).json()
    assert [m["path"] for m in rest["memories"]] == [
        "/memories/f.md",
        "/memories/g.md",
        "/memories/h.md",
    ]
    assert rest["nextCursor"] is None


def test_listing_an_unknown_agent_is_404(api: Api) -> None:
    assert_error(api.get(agent_url("users/ghost", "/memories")), 404, "not_found")


# ---- reading ------------------------------------------------------------------------


def test_read_json_fields_and_etag(api: Api) -> None:
    text = "---\ndescription: Naming rules\ntags: [a, b]\nlevel: 3\nowner: alice\n---\n# Naming\n"
    api.must_write("/memories/conventions/naming.md", text)
    response = api.get(memory_url("/memories/conventions/naming.md"))
    assert response.status_code == 200
    body = response.json()
    assert set(body) == MEMORY_FIELDS
    assert body["path"] == "/memories/conventions/naming.md"
    assert body["content"] == text
    assert body["bytes"] == len(text.encode())
    assert body["contentSha256"] == sha(text)
    assert body["description"] == "Naming rules"
    assert body["metadata"] == {"level": 3, "owner": "alice"}
    assert body["version"] == 1
    assert body["createdAt"] == body["updatedAt"]
    assert response.headers["etag"] == f'"{sha(text)}"'

    api.must_write("/memories/conventions/naming.md", "# Naming v2\n")
    again = api.get(memory_url("/memories/conventions/naming.md")).json()
    assert again["version"] == 2
    assert again["description"] is None and again["metadata"] == {}
    assert again["createdAt"] == body["createdAt"]
    assert again["updatedAt"] > body["updatedAt"]


def test_read_accept_markdown_returns_the_exact_bytes(api: Api) -> None:
    raw = (
        "---\r\ndescription: crlf\r\n---\r\nline one\r\n  café ☕ 日本\ttab\r\nno newline".encode()
    )
    api.must_write("/memories/exact.md", raw)
    response = api.get(memory_url("/memories/exact.md"), headers={"Accept": "text/markdown"})
    assert response.status_code == 200
    assert response.content == raw
    assert response.headers["content-type"].startswith("text/markdown")
    assert response.headers["etag"] == f'"{sha(raw)}"'
    as_json = api.get(memory_url("/memories/exact.md")).json()
    assert as_json["content"].encode() == raw


def test_read_past_versions_of_superseded_and_deleted_paths(api: Api) -> None:
    url = memory_url("/memories/notes/todo.md")
    api.must_write("/memories/notes/todo.md", "one\n")
    api.must_write("/memories/notes/todo.md", "two\n")
    v1 = api.get(url, params={"version": "1"})
    assert v1.status_code == 200
    assert v1.json()["content"] == "one\n" and v1.json()["version"] == 1
    assert v1.headers["etag"] == '"' + sha("one\n") + '"'
    raw = api.get(url, params={"version": "1"}, headers={"Accept": "text/markdown"})
    assert raw.content == b"one\n"

    assert api.delete(url).status_code == 204
    assert_error(api.get(url), 404, "not_found")
    assert api.get(url, params={"version": "1"}).json()["content"] == "one\n"
    assert api.get(url, params={"version": "2"}).json()["content"] == "two\n"
    assert_error(api.get(url, params={"version": "3"}), 404, "not_found")  # the tombstone
    assert_error(api.get(url, params={"version": "4"}), 404, "not_found")
    for bad in ("0", "-1", "x", "1.0"):
        response = api.get(url, params={"version": bad})
        assert_error(response, 400, "invalid_request", field="version")

    # Recreated after the delete: history continues.
    assert api.write("/memories/notes/todo.md", "three\n").status_code == 201
    assert api.get(url).json()["version"] == 4


def test_read_missing_memory_is_404(api: Api) -> None:
    assert_error(api.get(memory_url("/memories/nope.md")), 404, "not_found", field="path")


def test_paths_are_nfc_normalised_and_case_sensitive(api: Api) -> None:
    decomposed = "/memories/cafe\u0301.md"
    composed = "/memories/caf\u00e9.md"
    assert api.write(decomposed, "coffee").status_code == 201
    read = api.get(memory_url(composed))
    assert read.status_code == 200 and read.json()["path"] == composed
    assert api.write(composed, "coffee").status_code == 200  # same memory, no-op
    assert_error(api.get(memory_url("/memories/CAFÉ.md")), 404, "not_found")


def test_unusual_but_valid_names_round_trip_through_urls(api: Api) -> None:
    names = ["a b.md", "100%.md", "q?.md", "h#1.md", "ü/ß.md", "x+y=z.md", "semi;colon.md"]
    for name in names:
        path = f"/memories/{name}"
        assert api.write(path, name).status_code == 201, name
        read = api.get(memory_url(path))
        assert read.status_code == 200, name
        assert (read.json()["path"], read.json()["content"]) == (path, name)
    listed = _paths(api)
    assert sorted(listed) == sorted(f"/memories/{n}" for n in names)


# ---- writing ------------------------------------------------------------------------


def test_write_markdown_and_json_201_then_200(api: Api) -> None:
    created = api.write("/memories/a.md", "# A\n")
    assert created.status_code == 201
    body = created.json()
    assert set(body) >= LISTING_FIELDS
    assert body["version"] == 1 and body["contentSha256"] == sha("# A\n")
    assert created.headers["etag"] == '"' + sha("# A\n") + '"'

    updated = api.put(memory_url("/memories/a.md"), json={"content": "# A v2\n"})
    assert updated.status_code == 200
    assert updated.json()["version"] == 2
    assert updated.json()["contentSha256"] == sha("# A v2\n")

    created_json = api.put(memory_url("/memories/b.md"), json={"content": "b"})
    assert created_json.status_code == 201
    charset = api.put(
        memory_url("/memories/c.md"),
        content="ç".encode(),
        headers={"Content-Type": "text/markdown; charset=utf-8"},
    )
    assert charset.status_code == 201
    assert api.get(memory_url("/memories/c.md")).json()["content"] == "ç"
    assert api.get(memory_url("/memories/a.md")).json()["content"] == "# A v2\n"
    for doc, field in (({"content": 5}, "content"), ({}, "content")):
        response = api.put(memory_url("/memories/d.md"), json=doc)
        assert_error(response, 400, "invalid_request", field=field)


def test_identical_content_is_a_no_op(api: Api) -> None:
    api.must_write("/memories/a.md", "same")
    revision = _revision(api)
    again = api.write("/memories/a.md", "same", headers={"Memfs-Message": "retry"})
    assert again.status_code == 200
    assert again.json()["version"] == 1
    same_json = api.put(memory_url("/memories/a.md"), json={"content": "same"})
    assert same_json.status_code == 200 and same_json.json()["version"] == 1
    assert _revision(api) == revision
    assert len(api.versions("/memories/a.md")) == 1


def test_if_match(api: Api) -> None:
    api.must_write("/memories/a.md", "v1")
    right = api.write("/memories/a.md", "v2", headers={"If-Match": f'"{sha("v1")}"'})
    assert right.status_code == 200 and right.json()["version"] == 2

    revision = _revision(api)
    wrong = api.write("/memories/a.md", "v3", headers={"If-Match": f'"{sha("v1")}"'})
    assert_error(wrong, 412, "precondition_failed", field="If-Match")
    assert api.get(memory_url("/memories/a.md")).json()["content"] == "v2"
    assert _revision(api) == revision

    missing = api.write("/memories/new.md", "x", headers={"If-Match": f'"{sha("x")}"'})
    assert_error(missing, 412, "precondition_failed")
    assert api.get(memory_url("/memories/new.md")).status_code == 404
    for bad in ("v1", '"abc"', f'W/"{sha("v2")}"', f'"{sha("v2").upper()}"'):
        response = api.write("/memories/a.md", "v9", headers={"If-Match": bad})
        assert_error(response, 400, "invalid_request", field="If-Match")
    assert api.get(memory_url("/memories/a.md")).json()["content"] == "v2"


def test_if_none_match_star_creates_only(api: Api) -> None:
    created = api.write("/memories/a.md", "first", headers={"If-None-Match": "*"})
    assert created.status_code == 201
    again = api.write("/memories/a.md", "second", headers={"If-None-Match": "*"})
    assert_error(again, 412, "precondition_failed")
    assert api.get(memory_url("/memories/a.md")).json()["content"] == "first"
    assert len(api.versions("/memories/a.md")) == 1
    other = api.write("/memories/b.md", "x", headers={"If-None-Match": '"abc"'})
    assert_error(other, 400, "invalid_request", field="If-None-Match")


def test_message_and_actor_are_recorded(api: Api) -> None:
    api.write("/memories/a.md", "one", headers={"Memfs-Message": "first note"})
    api.write("/memories/a.md", "two")
    api.delete(memory_url("/memories/a.md"), headers={"Memfs-Message": "obsolete"})
    rows = api.versions("/memories/a.md")
    assert [(r["message"], r["actor"]) for r in rows] == [
        ("first note", "admin"),
        ("", "admin"),
        ("obsolete", "admin"),
    ]
    secret = api.make_key("writer", ["memories:write", "memories:read", f"agents:{AGENT}"])
    api.write("/memories/k.md", "k", auth=secret, headers={"Memfs-Message": "by key"})
    [row] = api.versions("/memories/k.md")
    assert (row["actor"], row["message"]) == ("key:writer", "by key")
    long = api.write("/memories/l.md", "l", headers={"Memfs-Message": "m" * 5000})
    assert_error(long, 400, "invalid_request", field="Memfs-Message")


def test_delete(api: Api) -> None:
    api.must_write("/memories/a.md", "v1")
    wrong = api.delete(memory_url("/memories/a.md"), headers={"If-Match": f'"{sha("zz")}"'})
    assert_error(wrong, 412, "precondition_failed")
    assert api.get(memory_url("/memories/a.md")).status_code == 200
    right = api.delete(memory_url("/memories/a.md"), headers={"If-Match": f'"{sha("v1")}"'})
    assert right.status_code == 204 and right.content == b""
    assert_error(api.get(memory_url("/memories/a.md")), 404, "not_found")
    assert_error(api.delete(memory_url("/memories/a.md")), 404, "not_found")
    assert_error(api.delete(memory_url("/memories/never.md")), 404, "not_found")
    assert api.get(LIST).json()["memories"] == []


def test_versions_route_fields_and_paging(api: Api) -> None:
    path = "/memories/v.md"
    api.write(path, "one", headers={"Memfs-Message": "m1"})
    api.write(path, "two!")
    api.delete(memory_url(path))
    api.write(path, "back")
    command = {"command": "rename", "old_path": path, "new_path": "/memories/w.md"}
    assert api.post(agent_url(rest="/memory:command"), json=command).json()["ok"] is True

    rows = api.versions(path)
    assert all(set(r) == VERSION_FIELDS for r in rows)
    assert [r["version"] for r in rows] == [1, 2, 3, 4, 5]
    assert [r["operation"] for r in rows] == [
        "created",
        "modified",
        "deleted",
        "created",
        "renamed",
    ]
    assert [r["contentSha256"] for r in rows] == [sha("one"), sha("two!"), None, sha("back"), None]
    assert [r["bytes"] for r in rows[:2]] == [3, 4]
    assert [r["revision"] for r in rows] == sorted(r["revision"] for r in rows)
    for older, newer in itertools.pairwise(rows):
        assert older["validTo"] == newer["validFrom"]
    assert rows[-1]["validTo"] is None
    moved = api.versions("/memories/w.md")
    assert [(r["operation"], r["contentSha256"]) for r in moved] == [("renamed", sha("back"))]

    # Relative paths work too; paging walks every version once.
    pages = api.walk(agent_url(rest="/versions"), "versions", {"path": "v.md", "limit": "2"})
    assert [len(p["versions"]) for p in pages] == [2, 2, 1]
    assert [r for p in pages for r in p["versions"]] == rows

    cursor = pages[0]["nextCursor"]
    other = api.get(agent_url(rest="/versions"), params={"path": "w.md", "cursor": cursor})
    assert_error(other, 400, "invalid_request", field="cursor")
    assert_error(api.get(agent_url(rest="/versions")), 400, "invalid_request", field="path")
    none = api.get(agent_url(rest="/versions"), params={"path": "never.md"})
    assert_error(none, 404, "not_found")


def test_file_and_folder_cannot_share_a_name(api: Api) -> None:
    api.must_write("/memories/a.md", "file")
    clash = api.write("/memories/a.md/b.md", "under a file")
    assert_error(clash, 409, "conflict", field="path")
    api.must_write("/memories/dir/x.md", "x")
    clash = api.write("/memories/dir", "a file named like a folder")
    assert_error(clash, 409, "conflict", field="path")
    assert _paths(api) == ["/memories/a.md", "/memories/dir/x.md"]


INVALID_PATHS = [
    "a/%2E%2E/b.md",  # '..' (encoded, or the client would resolve it)
    "%2E%2E/b.md",
    "a/%2E/b.md",
    "a//b.md",  # empty segment
    "a%5Cb.md",  # backslash
    "a%01b.md",  # control characters
    "a%0Ab.md",
    "a%00b.md",
    "a%7Fb.md",
    "a%2Fb.md",  # an encoded '/' inside one segment
    "a%2fb.md",
    "a/%2F/b.md",
    "a%FFb.md",  # not UTF-8
    "x" * 1100 + ".md",  # longer than 1024 bytes
]


def test_invalid_path_segments_are_400_and_write_nothing(api: Api) -> None:
    for raw in INVALID_PATHS:
        url = agent_url(rest=f"/memories/{raw}")
        response = api.put(url, content=b"x", headers={"Content-Type": "text/markdown"})
        assert_error(response, 400, "invalid_request", field="path")
        assert_error(api.get(url), 400, "invalid_request", field="path")
        assert_error(api.delete(url), 400, "invalid_request", field="path")
    assert api.get(LIST).json()["memories"] == []
    assert _revision(api) == 0


def test_invalid_yaml_is_400_naming_the_line(api: Api) -> None:
    text = "---\ntitle: ok\n  bad: x\n---\nbody\n"
    response = api.write("/memories/y.md", text)
    body = assert_error(response, 400, "invalid_request", field="content")
    assert "line 3" in body["message"]
    assert api.get(memory_url("/memories/y.md")).status_code == 404
    as_json = api.put(memory_url("/memories/y.md"), json={"content": text})
    assert "line 3" in assert_error(as_json, 400, "invalid_request")["message"]


def test_non_utf8_bodies_are_400(api: Api) -> None:
    raw = api.write("/memories/bin.md", b"ok \xff\xfe not text")
    assert_error(raw, 400, "invalid_request", field="content")
    bad_json = api.put(
        memory_url("/memories/bin.md"),
        content=b'{"content": "\xff"}',
        headers={"Content-Type": "application/json"},
    )
    assert_error(bad_json, 400, "invalid_request")
    surrogate = api.put(
        memory_url("/memories/bin.md"),
        content=b'{"content": "\\ud800"}',
        headers={"Content-Type": "application/json"},
    )
    assert_error(surrogate, 400, "invalid_request", field="content")
    assert api.get(memory_url("/memories/bin.md")).status_code == 404


def test_memory_over_memory_bytes_is_413(api: Api) -> None:
    assert api.write("/memories/max.md", "m" * MEMORY_BYTES).status_code == 201
    over = api.write("/memories/big.md", "m" * (MEMORY_BYTES + 1))
    assert_error(over, 413, "payload_too_large")
    over_json = api.put(memory_url("/memories/big.md"), json={"content": "é" * MEMORY_BYTES})
    assert_error(over_json, 413, "payload_too_large")
    assert api.get(memory_url("/memories/big.md")).status_code == 404
    assert _paths(api) == ["/memories/max.md"]


# ---- summary --------------------------------------------------------------------------


def test_summary_fields_and_states(api: Api) -> None:
    fields = {
        "agentId",
        "agentName",
        "memoryStoreId",
        "memoryCount",
        "totalBytes",
        "revision",
        "state",
        "pendingRunCount",
        "failedRunCount",
        "lastUpdatedAt",
        "lastCheckedAt",
        "nextRetryAt",
    }
    url = agent_url(rest="/memory")
    before = api.get(url).json()
    assert set(before) == fields
    agent = api.get(agent_url()).json()
    assert before["agentId"] == AGENT
    assert before["agentName"] == agent["name"]
    assert before["memoryStoreId"] == agent["memoryStoreId"]
    assert (before["memoryCount"], before["totalBytes"], before["revision"]) == (0, 0, 0)
    assert before["state"] == "waiting"
    assert (before["pendingRunCount"], before["failedRunCount"]) == (0, 0)
    assert before["lastUpdatedAt"] is None

    api.must_write("/memories/a.md", "abc")
    written = api.must_write("/memories/b/c.md", "de")
    after = api.get(url).json()
    assert after["state"] == "idle"
    assert (after["memoryCount"], after["totalBytes"], after["revision"]) == (2, 5, 2)
    assert after["lastUpdatedAt"] == written["updatedAt"]
    assert_error(api.get(agent_url("users/ghost", "/memory")), 404, "not_found")


# ---- memory:command -------------------------------------------------------------------


def _command(api: Api, doc: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    response = api.post(agent_url(rest="/memory:command"), json=doc, **kwargs)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert set(body) == {"ok", "result"}
    return body


def test_memory_command_round_trip(api: Api) -> None:
    created = _command(
        api,
        {"command": "create", "path": "/memories/prefs.md", "file_text": "likes tea\nhates rain\n"},
    )
    assert created == {"ok": True, "result": "File created successfully at: /memories/prefs.md"}
    viewed = _command(api, {"command": "view", "path": "/memories/prefs.md"})
    assert viewed["ok"] is True
    assert viewed["result"] == (
        "Here's the content of /memories/prefs.md with line numbers:\n"
        "     1\tlikes tea\n     2\thates rain\n     3\t"
    )
    replaced = _command(
        api,
        {
            "command": "str_replace",
            "path": "/memories/prefs.md",
            "old_str": "tea",
            "new_str": "coffee",
        },
    )
    assert replaced["ok"] is True
    assert "     1\tlikes coffee" in replaced["result"]
    ranged = _command(api, {"command": "view", "path": "/memories/prefs.md", "view_range": [2, 2]})
    assert ranged["result"].endswith("     2\thates rain")

    # The same memory over the plain routes, with one commit per change.
    read = api.get(memory_url("/memories/prefs.md")).json()
    assert read["content"] == "likes coffee\nhates rain\n"
    rows = api.versions("/memories/prefs.md")
    assert [(r["version"], r["operation"], r["actor"]) for r in rows] == [
        (1, "created", "admin"),
        (2, "modified", "admin"),
    ]
    assert rows[1]["revision"] == rows[0]["revision"] + 1
    assert _revision(api) == 2  # views commit nothing


def test_memory_command_records_memfs_message(api: Api) -> None:
    doc = {"command": "create", "path": "/memories/m.md", "file_text": "x"}
    _command(api, doc, headers={"Memfs-Message": "remember the user's timezone"})
    doc = {"command": "rename", "old_path": "/memories/m.md", "new_path": "/memories/n.md"}
    _command(api, doc, headers={"Memfs-Message": "tidy up"})
    [created, renamed] = api.versions("/memories/m.md")
    assert created["message"] == "remember the user's timezone"
    assert renamed["message"] == "tidy up"


def test_memory_command_refusals_change_nothing(api: Api) -> None:
    _command(api, {"command": "create", "path": "/memories/a.md", "file_text": "x"})
    again = _command(api, {"command": "create", "path": "/memories/a.md", "file_text": "y"})
    assert again == {"ok": False, "result": "File /memories/a.md already exists"}
    missing = _command(
        api, {"command": "str_replace", "path": "/memories/a.md", "old_str": "q", "new_str": "r"}
    )
    assert missing["ok"] is False
    assert "did not appear verbatim" in missing["result"]
    escape = _command(api, {"command": "view", "path": "/etc/passwd"})
    assert escape == {"ok": False, "result": "Path must start with /memories, got: /etc/passwd"}
    assert _revision(api) == 1
    assert api.get(memory_url("/memories/a.md")).json()["content"] == "x"


def test_memory_command_records_a_narrowed_subject(api: Api) -> None:
    secret = api.make_key("tool", ["memories:read", "memories:write", f"agents:{AGENT}"])
    narrowed = {"Memfs-Subject": "bob", "Memfs-Scopes": f"memories:write agents:{AGENT}"}
    doc = {"command": "create", "path": "/memories/bob.md", "file_text": "hi"}
    assert _command(api, doc, auth=secret, headers=narrowed)["ok"] is True
    [row] = api.versions("/memories/bob.md")
    assert row["actor"] == "subject:bob"
    # view needs memories:read, which the narrowed set dropped.
    view = api.post(
        agent_url(rest="/memory:command"),
        json={"command": "view", "path": "/memories"},
        auth=secret,
        headers=narrowed,
    )
    assert_error(view, 403, "forbidden")
