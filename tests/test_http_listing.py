"""A memory listing page is the listing JSON each memory's index row keeps
(``index.listing_text``, written when the commit is applied), joined by
``index.list_memories_json``, not rendered per memory: it must be exactly what
rendering the store's rows gives (same fields, values, order, string escapes and
timestamps), on data chosen to break that — non-ASCII, quotes and backslashes,
control characters, NUL, null and empty descriptions, paths in tricky byte order,
timestamps at the edges of the calendar — and after an index of schema 1 is upgraded.

The reference is the rendering the listing had before: ``Store.list_memories`` rows
through ``wire.listing_json`` into Starlette's ``JSONResponse`` encoding.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from http_fixtures import AGENT, Api, agent_url, open_api
from memfs import wire
from memfs.derived import index
from memfs.derived.index import FolderEntry, MemoryRow
from memfs.domain.commits import format_ts

LIST = agent_url(rest="/memories")
PAGE_ITEMS = 4  # small, so that walks cross pages and larger limits are coerced

# (path, description as written in YAML frontmatter, or None for no frontmatter)
TRICKY: list[tuple[str, str | None]] = [
    ("/memories/t/plain.md", "description: plain words"),
    ("/memories/t/unicode é.md", 'description: "café ✓ 日本語 🙂 Ωmega ß"'),
    ("/memories/t/quotes\"q'.md", "description: 'say \"hi\", a \\back\\slash\\ and </script>'"),
    (
        "/memories/t/controls.md",
        r'description: "tab\there\nnew line\r\b\f \x01\x1f\x7f nul\0 esc\e \u2028\u2029 \u0085"',
    ),
    ("/memories/t/empty-description.md", 'description: ""'),
    ("/memories/t/no-frontmatter.md", None),
    ("/memories/t/only-metadata.md", "topic: x"),
    ("/memories/t/a b.md", "description: space in path"),
    ("/memories/t/a-b.md", "description: dash"),
    ("/memories/t/a.md", "description: dot"),
    ("/memories/t/a/deeper.md", "description: in a subfolder\ntopic: x"),
    ("/memories/t/a/b/deepest.md", "description: two levels down"),
    ("/memories/t/Z upper.md", "description: upper case sorts first"),
    ("/memories/t/ä umlaut.md", "description: non-ASCII sorts last"),
    ("/memories/t/sub/x.md", "description: '{\"json\": [1, 2]}'\ntopic: y"),
    ("/memories/t/sub/y.md", None),
    ("/memories/t2/not-in-t.md", "description: another folder"),
    ("/memories/top.md", "description: at the root"),
]

# Timestamps at the edges of the calendar: before the epoch, the epoch, leap days, the
# last microsecond of years and centuries, the last instant of year 9999.
EDGE_TIMESTAMPS = [
    -86_400_000_001,  # 1969-12-30T23:59:59.999999Z
    -1,
    0,
    1,
    999_999,
    951_782_400_000_000,  # 2000-02-29T00:00:00Z
    951_868_799_999_999,  # 2000-02-29T23:59:59.999999Z
    4_107_542_399_000_001,  # 2100-02-28T23:59:59.000001Z
    1_767_225_599_999_999,  # 2025-12-31T23:59:59.999999Z
    1_798_761_600_123_456,
    253_402_300_799_999_999,  # 9999-12-31T23:59:59.999999Z
]


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Api]:
    with open_api(tmp_path, page_items=PAGE_ITEMS) as opened:
        opened.create_agent()
        for n, (path, frontmatter) in enumerate(TRICKY):
            head = f"---\n{frontmatter}\n---\n" if frontmatter is not None else ""
            opened.must_write(path, f"{head}# memory {n}\n")
        yield opened


def _reference(
    api: Api,
    params: dict[str, str],
    next_cursor: str | None,
) -> bytes:
    """The body the listing had when Python rendered it, for the same query."""
    store = api.app.services.store
    prefix = params.get("pathPrefix", "")
    depth_one = params.get("depth") == "1"
    filters = sorted(
        (k.removeprefix("metadata."), v) for k, v in params.items() if k.startswith("metadata.")
    )
    after = params.get("_after")
    items, _more = store.list_memories(
        AGENT,
        prefix,
        after=after,
        limit=min(int(params.get("limit", PAGE_ITEMS)), PAGE_ITEMS),
        depth_one=depth_one,
        filters=filters,
    )
    body: dict[str, object] = {
        "memories": [wire.listing_json(i) for i in items if isinstance(i, MemoryRow)],
        "folders": [i.path for i in items if isinstance(i, FolderEntry)],
    }
    if params.get("includeTotal") == "true":
        body["total"] = store.count_memories(AGENT, prefix, depth_one=depth_one, filters=filters)
    body["nextCursor"] = next_cursor
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def _walk_and_compare(api: Api, params: dict[str, str]) -> list[dict[str, Any]]:
    """Walk a listing to its end; each page is byte-identical to the reference."""
    pages: list[dict[str, Any]] = []
    cursor: str | None = None
    after: str | None = None
    while True:
        query = dict(params)
        if cursor is not None:
            query["cursor"] = cursor
        response = api.get(LIST, params=query)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "application/json"
        page = response.json()
        reference = _reference(api, {**params, **({"_after": after} if after else {})}, None)
        expected = json.loads(reference)
        expected["nextCursor"] = page["nextCursor"]
        assert page == expected
        assert (
            response.content
            == json.dumps(expected, ensure_ascii=False, separators=(",", ":")).encode()
        )
        pages.append(page)
        cursor = page["nextCursor"]
        if cursor is None:
            return pages
        # The next page starts after this one's last entry, as the store counts it.
        entries = [("m", m["path"]) for m in page["memories"]] + [("f", f) for f in page["folders"]]
        kind, last = max(entries, key=lambda e: e[1] + ("/" if e[0] == "f" else ""))
        after = last + "/" if kind == "f" else last
        assert len(pages) < 100


QUERIES: list[dict[str, str]] = [
    {},
    {"limit": "1"},
    {"limit": "3", "includeTotal": "true"},
    {"pathPrefix": "t"},
    {"pathPrefix": "t", "depth": "1"},
    {"pathPrefix": "/memories/t", "depth": "1", "limit": "2", "includeTotal": "true"},
    {"pathPrefix": "t/a", "depth": "1"},
    {"depth": "1"},
    {"metadata.topic": "x"},
    {"metadata.topic": "x", "depth": "1", "pathPrefix": "t"},
    {"metadata.topic": "nothing"},
    {"pathPrefix": "nowhere"},
    {"pathPrefix": "t", "limit": "200"},
]


@pytest.mark.parametrize("params", QUERIES, ids=[json.dumps(q) for q in QUERIES])
def test_every_page_is_byte_identical_to_the_python_rendering(
    api: Api, params: dict[str, str]
) -> None:
    pages = _walk_and_compare(api, params)
    assert all(p["nextCursor"] for p in pages[:-1]) and pages[-1]["nextCursor"] is None


def test_tricky_descriptions_come_back_exactly(api: Api) -> None:
    pages = _walk_and_compare(api, {"pathPrefix": "t"})
    listed = [m for p in pages for m in p["memories"]]
    described = {m["path"]: m["description"] for m in listed}
    assert described["/memories/t/controls.md"] == (
        "tab\there\nnew line\r\b\f \x01\x1f\x7f nul\x00 esc\x1b \u2028\u2029 \x85"
    )
    assert described["/memories/t/quotes\"q'.md"] == 'say "hi", a \\back\\slash\\ and </script>'
    assert described["/memories/t/unicode é.md"] == "café ✓ 日本語 🙂 Ωmega ß"
    assert described["/memories/t/empty-description.md"] == ""
    assert described["/memories/t/no-frontmatter.md"] is None
    assert described["/memories/t/only-metadata.md"] is None
    assert [m["path"] for m in listed] == sorted(described, key=str.encode)


def _set_updated_at(api: Api, values: dict[str, int]) -> None:
    """Give memories other timestamps in the (derived) index, as no clock would: the
    row as a commit applied at that time leaves it, its listing text included."""
    with api.app.services.store.index.write() as conn:
        for path, micros in values.items():
            size, sha256, description, version = conn.execute(
                "SELECT bytes, sha256, description, version FROM memories"
                " WHERE agent_id=? AND path=?",
                (AGENT, path),
            ).fetchone()
            conn.execute(
                "UPDATE memories SET updated_at=?, listing=? WHERE agent_id=? AND path=?",
                (
                    micros,
                    index.listing_text(path, size, sha256, description, version, micros),
                    AGENT,
                    path,
                ),
            )


def test_timestamps_at_the_edges_of_the_calendar(api: Api) -> None:
    paths = [p for p, _ in TRICKY][: len(EDGE_TIMESTAMPS)]
    _set_updated_at(api, dict(zip(paths, EDGE_TIMESTAMPS, strict=True)))
    for params in ({}, {"pathPrefix": "t", "depth": "1"}):
        pages = _walk_and_compare(api, params)
        stamps = {m["path"]: m["updatedAt"] for p in pages for m in p["memories"]}
        for path, micros in zip(paths, EDGE_TIMESTAMPS, strict=True):
            if path in stamps:
                assert stamps[path] == format_ts(micros)
    assert format_ts(EDGE_TIMESTAMPS[-1]) == "9999-12-31T23:59:59.999999Z"


def test_an_index_of_schema_1_gets_the_listings_when_opened(api: Api, tmp_path: Path) -> None:
    """An index made before rows kept their listing JSON is upgraded in place when a
    store opens it: every page is as before, and later commits keep it current."""
    store = api.app.services.store
    _set_updated_at(api, {"/memories/t/a.md": -1})  # a timestamp before the epoch too
    with store.index.write() as conn:
        before = _pages(conn)
        conn.execute("ALTER TABLE memories DROP COLUMN listing")
        conn.execute("UPDATE meta SET value=1 WHERE key='schema'")
    with open_api(tmp_path, page_items=PAGE_ITEMS) as upgraded:  # same data folder
        ustore = upgraded.app.services.store
        with ustore.index.read() as conn:
            assert conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone() == (
                index.SCHEMA_VERSION,
            )
            assert _pages(conn) == before
        ustore.write(AGENT, "/memories/t/a.md", b"---\ndescription: new\n---\n", actor="t")
        _walk_and_compare(upgraded, {})


def _pages(conn: index.Connection) -> list[index.ListingJson]:
    return [
        index.list_memories_json(
            conn, AGENT, folder, after=None, limit=200, depth_one=depth_one
        )
        for folder in ("/memories", "/memories/t")
        for depth_one in (False, True)
    ]


@pytest.mark.parametrize("depth_one", [False, True])
@pytest.mark.parametrize("limit", [1, 2, 5, 200])
def test_sqlite_page_equals_rendered_rows(api: Api, depth_one: bool, limit: int) -> None:
    """The fast path is taken for ordinary data, and every page of every walk (cursors
    inside, before and after the folder too) equals the rows rendered by Python."""
    store = api.app.services.store
    starts: list[str | None] = [
        None,
        "/memories/a",
        "/memories/t/",
        "/memories/t/a/",
        "/memories/u",
    ]
    starts += [p for p, _ in TRICKY]
    for folder in ("/memories", "/memories/t", "/memories/t/a"):
        for filters in ((), (("topic", "x"),)):
            for after in starts:
                with store.index.read() as conn:
                    fast = index.list_memories_json(
                        conn,
                        AGENT,
                        folder,
                        after=after,
                        limit=limit,
                        depth_one=depth_one,
                        filters=filters,
                    )
                    rows, more = index.list_memories(
                        conn,
                        AGENT,
                        folder,
                        after=after,
                        limit=limit,
                        depth_one=depth_one,
                        filters=filters,
                    )
                assert fast == index.listing_page(rows, more), (folder, filters, after)


def test_total_with_depth_one_counts_the_files_and_folders_listed(tmp_path: Path) -> None:
    with open_api(tmp_path) as api:
        api.create_agent()
        for path in ("/memories/a.md", "/memories/f/x.md", "/memories/f/y.md", "/memories/g/h/z.md"):
            api.write(path, "x")
        url = agent_url(AGENT, "/memories")
        pages = api.walk(url, "memories", {"depth": "1", "includeTotal": "true", "limit": "1"})
        listed = sum(len(p["memories"]) + len(p["folders"]) for p in pages)
        # a.md, f and g: one file and two folders; the files inside f and g are not counted.
        assert listed == 3
        assert {p["total"] for p in pages} == {3}
        inside = api.get(url, params={"depth": "1", "includeTotal": "true", "pathPrefix": "f"})
        assert inside.json()["total"] == 2
