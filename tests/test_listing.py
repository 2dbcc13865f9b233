"""Listing one folder: keyset pages in bytewise order, depth 1, filters, totals."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memfs.canonical.backend import MemoryBackend
from memfs.core.store import Delete, Put, Store
from memfs.derived.index import FolderEntry, MemoryRow

ACTOR = "test"
_agents = itertools.count()


@pytest.fixture
def fast_store(tmp_path: Path) -> Iterator[Store]:
    """A Store whose objects live in memory: listings are answered by the index alone,
    so the many commits of the property tests need not wait for fsync."""
    opened = Store(tmp_path / "fast", backend=MemoryBackend())
    yield opened
    opened.close()


def fresh_agent(store: Store) -> str:
    return store.create_agent(f"listing/a{next(_agents)}").agent_id


def put_all(store: Store, agent: str, files: dict[str, bytes]) -> None:
    store.apply(agent, [Put(path, data) for path, data in files.items()], actor=ACTOR)


def key(item: MemoryRow | FolderEntry) -> str:
    """The item's cursor: its path, plus '/' for a folder."""
    return item.path + "/" if isinstance(item, FolderEntry) else item.path


def names(items: list[MemoryRow | FolderEntry]) -> list[str]:
    return [key(item) for item in items]


def walk(
    store: Store,
    agent: str,
    folder: str = "",
    *,
    limit: int,
    depth_one: bool = False,
    filters: list[tuple[str, str]] | None = None,
) -> list[str]:
    """Every page of a listing, following the cursor; checks each page's shape."""
    out: list[str] = []
    after: str | None = None
    while True:
        page, more = store.list_memories(
            agent, folder, after=after, limit=limit, depth_one=depth_one, filters=filters or []
        )
        assert len(page) <= limit
        if more:
            assert len(page) == limit
        out += names(page)
        if not more:
            return out
        after = key(page[-1])


def utf8_sorted(values: set[str] | list[str]) -> list[str]:
    return sorted(values, key=lambda v: v.encode())


def expected_listing(paths: set[str], folder: str, depth_one: bool) -> list[str]:
    under = {p for p in paths if p.startswith(folder + "/")}
    if not depth_one:
        return utf8_sorted(under)
    entries = set()
    for path in under:
        rest = path[len(folder) + 1 :]
        if "/" in rest:
            entries.add(folder + "/" + rest.split("/", 1)[0] + "/")
        else:
            entries.add(path)
    return utf8_sorted(entries)


# ---- one folder, in order ----------------------------------------------------------


def test_prefix_keeps_one_folder(store: Store, agent: str) -> None:
    put_all(
        store,
        agent,
        {
            "/memories/conventions/a.md": b"a",
            "/memories/conventions/sub/b.md": b"b",
            "/memories/conventions2/c.md": b"c",
            "/memories/conventions.md": b"d",
            "/memories/conventions-x/e.md": b"e",
            "/memories/conventionsz.md": b"f",
        },
    )
    expected = ["/memories/conventions/a.md", "/memories/conventions/sub/b.md"]
    for prefix in ["conventions", "conventions/", "/memories/conventions"]:
        page, more = store.list_memories(agent, prefix)
        assert (names(page), more) == (expected, False)
        assert store.count_memories(agent, prefix) == 2
    page, _ = store.list_memories(agent, "conventions", depth_one=True)
    assert names(page) == ["/memories/conventions/a.md", "/memories/conventions/sub/"]
    assert store.list_memories(agent, "convention") == ([], False)
    assert store.list_memories(agent, "conventions/a.md") == ([], False)  # a file, not a folder


def test_listing_is_bytewise_utf8_order(store: Store, agent: str) -> None:
    paths = [
        "/memories/Zebra.md",
        "/memories/a b.md",
        "/memories/a-b.md",
        "/memories/a.md",
        "/memories/a/inner.md",
        "/memories/a0.md",
        "/memories/aa.md",
        "/memories/z.md",
        "/memories/\u00e9t\u00e9.md",
        "/memories/\u65e5\u672c.md",
        "/memories/\uff21.md",
        "/memories/\U0001f600.md",
    ]
    put_all(store, agent, {p: p.encode() for p in reversed(paths)})
    assert utf8_sorted(paths) == paths  # the list above is already in byte order
    page, more = store.list_memories(agent)
    assert (names(page), more) == (paths, False)
    page, _ = store.list_memories(agent, depth_one=True)
    assert names(page) == [p if p != "/memories/a/inner.md" else "/memories/a/" for p in paths]


def test_limit_and_more(store: Store, agent: str) -> None:
    put_all(store, agent, {f"/memories/n{i}.md": b"x" for i in range(5)})
    page, more = store.list_memories(agent, limit=5)
    assert (len(page), more) == (5, False)  # exactly full: nothing follows
    page, more = store.list_memories(agent, limit=6)
    assert (len(page), more) == (5, False)
    page, more = store.list_memories(agent, limit=2)
    assert (names(page), more) == (["/memories/n0.md", "/memories/n1.md"], True)
    page, more = store.list_memories(agent, after="/memories/n2.md", limit=2)
    assert (names(page), more) == (["/memories/n3.md", "/memories/n4.md"], False)
    page, more = store.list_memories(agent, after="/memories/n4.md", limit=2)
    assert (page, more) == ([], False)
    # The cursor need not be an existing entry (it may have been deleted since).
    page, _ = store.list_memories(agent, after="/memories/n1.zz", limit=10)
    assert names(page) == ["/memories/n2.md", "/memories/n3.md", "/memories/n4.md"]


def test_a_cursor_outside_the_folder_never_widens_it(store: Store, agent: str) -> None:
    put_all(
        store,
        agent,
        {
            p: b""
            for p in ["/memories/b.md", "/memories/c.md", "/memories/c/x.md", "/memories/d.md"]
        },
    )
    for depth_one in (False, True):
        for after in ["/memories/a", "/memories/a/", "/memories/b.md", "/memories/c.md"]:
            page, more = store.list_memories(agent, "c", after=after, depth_one=depth_one)
            assert (names(page), more) == (["/memories/c/x.md"], False), (after, depth_one)
        page, _ = store.list_memories(agent, "c", after="/memories/c/x.md", depth_one=depth_one)
        assert page == []
        page, _ = store.list_memories(agent, "c", after="/memories/zzz", depth_one=depth_one)
        assert page == []


def test_depth_one_merges_files_and_folders_under_one_cursor(store: Store, agent: str) -> None:
    put_all(
        store,
        agent,
        {
            "/memories/a!.md": b"",
            "/memories/a.md": b"",
            "/memories/a/1.md": b"",
            "/memories/a/deep/2.md": b"",
            "/memories/a0.md": b"",
            "/memories/b/3.md": b"",
            "/memories/b/4.md": b"",
            "/memories/c.md": b"",
        },
    )
    full = ["/memories/a!.md", "/memories/a.md", "/memories/a/", "/memories/a0.md"]
    full += ["/memories/b/", "/memories/c.md"]
    page, more = store.list_memories(agent, depth_one=True)
    assert (names(page), more) == (full, False)
    assert all(isinstance(i, FolderEntry) == i.path.endswith(("a", "b")) for i in page)
    # A page boundary right after a folder resumes after the whole folder.
    page, more = store.list_memories(agent, depth_one=True, limit=3)
    assert (names(page), more) == (full[:3], True)
    page, more = store.list_memories(agent, depth_one=True, after="/memories/a/", limit=2)
    assert (names(page), more) == (full[3:5], True)
    page, more = store.list_memories(agent, depth_one=True, after="/memories/b/", limit=2)
    assert (names(page), more) == (full[5:], False)
    for limit in range(1, 8):
        assert walk(store, agent, limit=limit, depth_one=True) == full
    # Inside a folder, depth 1 is relative to that folder.
    page, _ = store.list_memories(agent, "a", depth_one=True)
    assert names(page) == ["/memories/a/1.md", "/memories/a/deep/"]


def test_metadata_filters(store: Store, agent: str) -> None:
    put_all(
        store,
        agent,
        {
            "/memories/1.md": b"---\nteam: core\npriority: 2\ndraft: true\n---\n",
            "/memories/2.md": b"---\nteam: core\npriority: 3\ndraft: false\n---\n",
            "/memories/3.md": b"---\nteam: web\npriority: 2\n---\n",
            "/memories/sub/4.md": b"---\nteam: core\npriority: '2'\ntags: [core]\n---\n",
            "/memories/5.md": b"no frontmatter, team: core\n",
        },
    )

    def listed(filters: list[tuple[str, str]], depth_one: bool = False) -> list[str]:
        page, _ = store.list_memories(agent, filters=filters, depth_one=depth_one)
        return names(page)

    assert listed([("team", "core")]) == ["/memories/1.md", "/memories/2.md", "/memories/sub/4.md"]
    assert listed([("priority", "2")]) == ["/memories/1.md", "/memories/3.md", "/memories/sub/4.md"]
    assert listed([("draft", "true")]) == ["/memories/1.md"]
    assert listed([("draft", "false")]) == ["/memories/2.md"]
    assert listed([("draft", "True")]) == []
    assert listed([("team", "core"), ("priority", "2")]) == ["/memories/1.md", "/memories/sub/4.md"]
    assert listed([("tags", "core")]) == []  # lists are not filterable metadata
    assert listed([("team", "nobody")]) == []
    assert listed([("team", "core")], depth_one=True) == [
        "/memories/1.md",
        "/memories/2.md",
        "/memories/sub/",
    ]
    assert listed([("team", "web")], depth_one=True) == ["/memories/3.md"]
    assert store.count_memories(agent, filters=[("team", "core")]) == 3
    assert store.count_memories(agent, filters=[("team", "core")], depth_one=True) == 3
    assert walk(store, agent, limit=1, filters=[("priority", "2")]) == [
        "/memories/1.md",
        "/memories/3.md",
        "/memories/sub/4.md",
    ]
    # A new version's metadata replaces the old one's.
    store.write(agent, "/memories/1.md", b"---\nteam: web\n---\n", actor=ACTOR)
    assert listed([("team", "core")]) == ["/memories/2.md", "/memories/sub/4.md"]
    assert listed([("priority", "2")]) == ["/memories/3.md", "/memories/sub/4.md"]
    store.delete(agent, "/memories/3.md", actor=ACTOR)
    assert listed([("team", "web")]) == ["/memories/1.md"]


def test_totals(store: Store, agent: str) -> None:
    put_all(
        store,
        agent,
        {
            "/memories/a.md": b"",
            "/memories/x/1.md": b"",
            "/memories/x/2.md": b"",
            "/memories/x/y/3.md": b"",
            "/memories/z/4.md": b"",
        },
    )
    assert store.count_memories(agent) == 5
    assert store.count_memories(agent, depth_one=True) == 3  # a.md, x/, z/
    assert store.count_memories(agent, "x") == 3
    assert store.count_memories(agent, "x", depth_one=True) == 3  # 1.md, 2.md, y/
    assert store.count_memories(agent, "nothing") == 0
    assert store.count_memories(agent, "nothing", depth_one=True) == 0
    store.delete(agent, "/memories/x/y/3.md", actor=ACTOR)
    assert store.count_memories(agent, "x", depth_one=True) == 2


def test_listing_items_carry_the_listing_fields(store: Store, agent: str) -> None:
    store.write(agent, "/memories/a.md", b"---\ndescription: hello\n---\nbody", actor=ACTOR)
    store.write(agent, "/memories/a.md", b"---\ndescription: again\n---\nbody", actor=ACTOR)
    (item,), _ = store.list_memories(agent)
    assert isinstance(item, MemoryRow)
    memory = store.read(agent, "/memories/a.md")
    assert (item.sha256, item.size, item.version) == (memory.sha256, memory.size, 2)
    assert item.description == "again"
    assert item.updated_at == memory.updated_at


# ---- walking pages -----------------------------------------------------------------

_SEGMENTS = st.sampled_from(["a", "a.md", "a-b", "b", "b0", "é", "Z", "n1", "n10"])


def _paths(parts: list[list[str]]) -> set[str]:
    """Memory paths from segment lists, dropping any that would clash file-vs-folder."""
    chosen: set[str] = set()
    for segments in parts:
        path = "/memories/" + "/".join(segments)
        folders = {"/memories/" + "/".join(segments[:i]) for i in range(1, len(segments))}
        if folders & chosen or any(p.startswith(path + "/") for p in chosen):
            continue
        chosen.add(path)
    return chosen


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    parts=st.lists(st.lists(_SEGMENTS, min_size=1, max_size=3), min_size=0, max_size=25),
    limit=st.integers(min_value=1, max_value=7),
    folder_parts=st.lists(_SEGMENTS, max_size=2),
)
def test_walking_pages_returns_every_entry_once_in_order(
    fast_store: Store, parts: list[list[str]], limit: int, folder_parts: list[str]
) -> None:
    agent = fresh_agent(fast_store)
    paths = _paths(parts)
    if paths:
        put_all(fast_store, agent, {p: b"" for p in paths})
    folder = "/memories" + "".join("/" + s for s in folder_parts)
    for depth_one in (False, True):
        expected = expected_listing(paths, folder, depth_one)
        assert walk(fast_store, agent, folder, limit=limit, depth_one=depth_one) == expected
        assert fast_store.count_memories(agent, folder, depth_one=depth_one) == len(expected)


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(min_value=0, max_value=2**32 - 1), depth_one=st.booleans())
def test_paging_during_changes_never_repeats_or_skips(
    fast_store: Store, seed: int, depth_one: bool
) -> None:
    rng = random.Random(seed)
    agent = fresh_agent(fast_store)
    names_pool = [f"{c}{n}" for c in "abc" for n in range(4)]

    def random_path() -> str:
        depth = rng.randint(1, 3)
        # Files end in .md and folders don't, so no file-vs-folder clash can happen.
        folders = [rng.choice(names_pool) for _ in range(depth - 1)]
        return "/memories/" + "/".join([*folders, rng.choice(names_pool) + ".md"])

    stable = {random_path() for _ in range(20)}
    put_all(fast_store, agent, {p: b"stable" for p in stable})
    volatile: set[str] = set()
    seen: list[str] = []
    after: str | None = None
    limit = rng.randint(2, 5)
    while True:
        page, more = fast_store.list_memories(agent, after=after, limit=limit, depth_one=depth_one)
        seen += names(page)
        if not more:
            break
        after = key(page[-1])
        # Others change the folder between two pages: add entries, delete added ones.
        ops: list[Put | Delete] = []
        for _ in range(rng.randint(1, 4)):
            path = random_path()
            if path not in stable and path not in volatile:
                ops.append(Put(path, b"volatile"))
                volatile.add(path)
        older = sorted(volatile - {op.path for op in ops})
        for path in rng.sample(older, k=min(2, len(older))):
            if rng.random() < 0.5:
                ops.append(Delete(path))
                volatile.discard(path)
        if ops:
            fast_store.apply(agent, ops, actor="other")

    assert len(seen) == len(set(seen)), "an entry came twice"
    assert seen == utf8_sorted(seen), "the walk went backwards"
    must_see = set(expected_listing(stable, "/memories", depth_one))
    assert must_see <= set(seen), f"skipped {sorted(must_see - set(seen))}"
