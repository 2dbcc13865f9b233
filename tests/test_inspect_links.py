"""Inspect's graph edges read from the index's links table answer exactly as the old
computation did (every stored version's content read and its links extracted), on
both engines.

The old edges walker is kept in tests/inspect_oracle.py, only as the oracle. Each test walks inspect in
small pages, every listing at once (chunks, nodes, edges, log), twice side by side:
once with the oracle in place of the edges walker, once as shipped. Commits land
between the pages (and before a pinned walk's first page). Page by page the two walks
must give the same items, and their tokens the same pin and position. A varied corpus:
wiki, inline, reference, relative and absolute links, links to missing paths, links in
code (ignored), external URLs, duplicates, memories without links, many versions,
renamed and deleted targets, and agents inside and outside a scope.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from inspect_oracle import patched
from memfs.core import inspect
from memfs.core.planner import Delete, Move, Op, Put
from memfs.core.store import Store
from memfs.core.tokens import Signer
from memfs.derived.index import walks
from memfs.domain.commits import parse_ts

SIGNER = Signer(b"inspect-links-test-key" * 2)
SCOPE = "team"
AGENTS = ("team", "team/a", "team/b", "teamx")  # teamx: outside the scope
LIMITS = {"chunks": 4, "nodes": 5, "edges": 3, "log": 3}
NAMES = ("a", "b", "docs/c", "docs/deep/d", "e", "docs/f")


def content(rng: random.Random) -> bytes:
    """A memory with a random mix of links (a third of them without any)."""
    if rng.random() < 0.33:
        return f"# plain {rng.random()}\n\nno links here\n".encode()
    forms = [
        lambda n: f"[[{n}]]",
        lambda n: f"[[{n}|alias]]",
        lambda n: f"[text](/memories/{n}.md)",
        lambda n: f"[rel](./{n.rsplit('/', 1)[-1]}.md)",
        lambda n: f"[up](../{n}.md)",
        lambda n: f"[ref]: {n}.md",
        lambda n: f"[[{n}#heading]]",
        lambda n: f"`[[{n}]]` in code",
        lambda n: f"```\n[[{n}]]\n```",
        lambda n: "[out](https://example.com/x.md)",
        lambda n: f"[[missing/{n}]]",
    ]
    parts = [f"# note {rng.random()}"]
    for _ in range(rng.randint(1, 6)):
        parts.append(rng.choice(forms)(rng.choice(NAMES)))
    return ("\n\n".join(parts) + "\n").encode()


def random_ops(store: Store, agent: str, rng: random.Random) -> list[Op]:
    """One commit's worth of changes: writes, and now and then a delete or a rename."""
    live = [m.path for m in store.list_memories(agent, "", after=None, limit=1000)[0]]
    ops: list[Op] = []
    touched: set[str] = set()
    for _ in range(rng.randint(1, 3)):
        roll = rng.random()
        if live and roll < 0.15:
            path = rng.choice(live)
            if path not in touched:
                ops.append(Delete(path))
                touched.add(path)
        elif live and roll < 0.25:
            src = rng.choice(live)
            dst = f"/memories/{rng.choice(NAMES)}-{rng.randint(0, 9)}.md"
            if src not in touched and dst not in touched and dst not in live:
                ops.append(Move(src, dst))
                touched |= {src, dst}
        else:
            path = f"/memories/{rng.choice(NAMES)}.md"
            if path not in touched:
                ops.append(Put(path, content(rng)))
                touched.add(path)
    return ops or [Put(f"/memories/{rng.choice(NAMES)}.md", content(rng))]


def commit_some(store: Store, rng: random.Random, count: int = 1) -> None:
    for _ in range(count):
        agent = rng.choice(AGENTS)
        store.apply(agent, random_ops(store, agent, rng), actor="t", message="m")


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    location = None
    if request.param == "postgresql":
        location = request.getfixturevalue("postgres_server").new_database()
    opened = Store(tmp_path / "data", index_location=location)
    for agent in AGENTS:
        opened.create_agent(agent)
    rng = random.Random(7)
    commit_some(opened, rng, 60)
    try:
        yield opened
    finally:
        opened.close()


class Walk:
    """One inspect walk, a page at a time, every listing until each is exhausted."""

    def __init__(self, store: Store, target: inspect.Target, as_of: int | None, old: bool):
        self.store, self.target, self.as_of, self.old = store, target, as_of, old
        self.tokens: dict[str, str | None] = dict.fromkeys(LIMITS)
        self.started = False

    @property
    def done(self) -> bool:
        return self.started and not any(self.tokens.values())

    def page(self) -> dict[str, Any]:
        """The next page: each listing's items, and its token decoded (pin, position)."""
        wanted = LIMITS if not self.started else {k: v for k, v in self.tokens.items() if v}
        pages = {k: inspect.Page(LIMITS[k], self.tokens[k]) for k in wanted}
        with patched(self.old):
            body = inspect.inspect(self.store, self.target, pages, self.as_of, SIGNER)
        self.started = True
        names = {"chunks": "nextChunkToken", "nodes": "nextNodeToken"}
        names |= {"edges": "nextEdgeToken", "log": "nextLogToken"}
        out: dict[str, Any] = {"readTimestamp": body["readTimestamp"]}
        items = {
            "chunks": body.get("vectors", {}).get("chunks"),
            "nodes": body.get("graph", {}).get("nodes") if "nodes" in pages else None,
            "edges": body.get("graph", {}).get("edges") if "edges" in pages else None,
            "log": body.get("log", {}).get("steps"),
        }
        for listing in pages:
            token = body[names[listing]] or None
            self.tokens[listing] = token
            decoded = inspect._decode(SIGNER, token, listing, self.target) if token else None
            out[listing] = (items[listing], decoded)
        return out


def side_by_side(
    store: Store,
    target: inspect.Target,
    as_of: int | None,
    between: Callable[[], None],
) -> list[dict[str, Any]]:
    """Walk with the oracle and as shipped, page for page, ``between`` after each pair;
    assert every pair equal; return the shipped walk's pages."""
    old, new = Walk(store, target, as_of, True), Walk(store, target, as_of, False)
    pages: list[dict[str, Any]] = []
    while not (old.done and new.done):
        assert not old.done and not new.done, "one walk ended before the other"
        expected, got = old.page(), new.page()
        assert got == expected, f"page {len(pages)} differs"
        pages.append(got)
        between()
    return pages


def _edges_of(pages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for p in pages if "edges" in p for e in p["edges"][0]]


@pytest.mark.parametrize("kind", ["agent", "scope"])
def test_edges_from_the_links_table_equal_the_old_computation(store: Store, kind: str) -> None:
    target = inspect.Target(kind, SCOPE if kind == "scope" else "team/a")
    rng = random.Random(11)

    # Unpinned: the first page pins the walk at its readTimestamp; commits land between.
    pages = side_by_side(store, target, None, lambda: commit_some(store, rng))
    edges = _edges_of(pages)
    assert len(edges) > 3 * LIMITS["edges"], "the corpus gives many edge pages"
    assert {e["targetExists"] for e in edges} == {True, False}
    assert any(e["sourceVersion"] > 1 for e in edges)
    if kind == "scope":
        assert {e["agentId"] for e in edges} == {"team", "team/a", "team/b"}

    # Pinned at an instant before more commits; they land before and between pages.
    pin = parse_ts(pages[-1]["readTimestamp"])
    commit_some(store, rng, 5)
    pinned = side_by_side(store, target, pin, lambda: commit_some(store, rng))
    # The first walk was pinned at that instant by its tokens: the same pages, item by
    # item, though many commits landed since.
    assert pinned == pages

    # Unpinned again, on the store as it is now (deleted and renamed targets included):
    # stored versions stay, so their edges do; targets' live versions move on.
    now = side_by_side(store, target, None, lambda: None)
    assert len(_edges_of(now)) > len(edges)


def test_a_default_page_of_edges_equals_the_old_one_at_every_position(store: Store) -> None:
    """The API's default and largest edge pages, walked to the end, old and new."""
    for limit in (100, 500):
        target = inspect.Target("scope", SCOPE)
        positions: dict[bool, list[Any]] = {}
        for old in (True, False):
            token: str | None = None
            walked: list[Any] = []
            while True:
                with patched(old):
                    body = inspect.inspect(
                        store, target, {"edges": inspect.Page(limit, token)}, None, SIGNER
                    )
                token = body["nextEdgeToken"] or None
                walked.append(
                    (
                        body["graph"]["edges"],
                        inspect._decode(SIGNER, token, "edges", target)[1] if token else None,
                    )
                )
                if token is None:
                    break
            positions[old] = walked
        assert positions[False] == positions[True]


def test_an_edges_page_reads_no_content_and_seeks_the_links_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """300 versions without links and one with: the edges page finds that one without
    reading any content (the old walk read all 301), by a primary-key range."""
    store = Store(tmp_path / "data")
    try:
        store.create_agent("solo")
        ops: list[Op] = [Put(f"/memories/n{i:03d}.md", b"# no links\n") for i in range(300)]
        store.apply("solo", ops, actor="t")
        store.write("solo", "/memories/z.md", b"see [[n001]] and [[gone]]\n", actor="t")

        def no_content(*_args: object) -> str:
            raise AssertionError("an edges page read a content")

        monkeypatch.setattr(inspect, "_content", no_content)
        target = inspect.Target("agent", "solo")
        body = inspect.inspect(store, target, {"edges": inspect.Page(100, None)}, None, SIGNER)
        got = [(e["targetPath"], e["target"]) for e in body["graph"]["edges"]]
        assert got == [
            ("/memories/n001.md", "solo:/memories/n001.md@1"),
            ("/memories/gone.md", None),
        ]
        with store.index.read() as conn:
            plan = " ".join(
                str(row[-1])
                for row in conn.execute(
                    "EXPLAIN QUERY PLAN " + walks.LINK_ROWS,
                    (1 << 62, 1 << 62, "solo", "", 0, -1, "solo\x00", 1 << 62, 101),
                )
            )
        assert "SEARCH l USING PRIMARY KEY" in plan and "TEMP B-TREE" not in plan, plan
    finally:
        store.close()
