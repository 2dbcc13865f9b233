"""The Store: agents, writes with preconditions, versions, the log on disk and the
working tree that mirrors it."""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import memfs.canonical.backend
import memfs.core.store
from memfs.canonical import layout
from memfs.core.store import Delete, Move, Put, Store
from memfs.derived.index import MemoryRow
from memfs.derived.index.postgres import PostgresIndex
from memfs.domain.commits import CREATED, MODIFIED, Change, Commit, parse_ts
from memfs.errors import Conflict, Damaged, InvalidRequest, NotFound, PreconditionFailed
from segment_files import frames, segment_files


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every Store test runs on each backend (S3: a real SeaweedFS), and on the
    PostgreSQL index, but those marked ``on_disk`` (they read the data folder's files:
    the on-disk format is LocalBackend's and the SQLite index's alone)."""
    if "store" in metafunc.fixturenames:
        on_disk = metafunc.definition.get_closest_marker("on_disk") is not None
        kinds = ["local"] if on_disk else ["local", "memory", "s3", "postgresql"]
        metafunc.parametrize("store", kinds, indirect=True)


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A Store on ``tmp_path / "data"`` with the backend of the test's parameter
    ("postgresql": LocalBackend with the index in a fresh PostgreSQL database)."""
    backend: memfs.canonical.backend.Backend | None = None
    location = None
    if request.param == "memory":
        backend = memfs.canonical.backend.MemoryBackend()
    elif request.param == "s3":
        backend = request.getfixturevalue("seaweedfs").backend("store")
    elif request.param == "postgresql":
        location = request.getfixturevalue("postgres_server").new_database()
    opened = Store(tmp_path / "data", backend=backend, index_location=location)
    try:
        yield opened
    finally:
        opened.close()


A = "/memories/a.md"
B = "/memories/b.md"
C = "/memories/c.md"
ACTOR = "test"
TABLES = ("agents", "commits", "versions", "memories", "memory_meta", "blobs")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tree_root(store: Store, agent_id: str) -> Path:
    return layout.worktree_root(store.data_dir, agent_id)


def tree_files(store: Store, agent_id: str) -> dict[str, bytes]:
    root = tree_root(store, agent_id)
    return {
        "/memories/" + p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def current(store: Store, agent_id: str) -> dict[str, bytes]:
    """Every current memory with its content, as the store answers it."""
    page, more = store.list_memories(agent_id, limit=10_000)
    assert not more
    out: dict[str, bytes] = {}
    for item in page:
        assert isinstance(item, MemoryRow)
        out[item.path] = store.read(agent_id, item.path).content
    return out


def assert_tree_matches(store: Store, agent_id: str) -> None:
    assert tree_files(store, agent_id) == current(store, agent_id)


def log_keys(store: Store, agent_id: str) -> list[str]:
    """The agent's log entries through its backend (frames of segments on LocalBackend)."""
    return [k for k in store.backend.list(layout.log_prefix(agent_id)) if k.endswith(".json")]


def log_entries(store: Store, agent_id: str) -> list[dict[str, Any]]:
    return [json.loads(store.backend.get(k)) for k in log_keys(store, agent_id)]


def index_rows(store: Store, agent_id: str) -> dict[str, int]:
    if isinstance(store.index, PostgresIndex):
        with psycopg.connect(store.index.url) as pg:
            return {
                t: pg.execute(
                    f"SELECT COUNT(*) FROM {t} WHERE agent_id=%s", (agent_id,)
                ).fetchone()[0]  # type: ignore[index]
                for t in TABLES
            }
    conn = sqlite3.connect(store.index.path)
    try:
        return {
            t: conn.execute(f"SELECT COUNT(*) FROM {t} WHERE agent_id=?", (agent_id,)).fetchone()[0]
            for t in TABLES
        }
    finally:
        conn.close()


# ---- agents -------------------------------------------------------------------------


def test_create_and_get_agent(store: Store) -> None:
    made = store.create_agent("users/alice/assistant", "Alice's helper")
    assert made.agent_id == "users/alice/assistant"
    assert made.name == "Alice's helper"
    assert made.revision == 0
    got = store.get_agent("users/alice/assistant")
    assert got == made
    assert re.fullmatch(r"[0-9a-f-]{36}", got.memory_store_id)
    # The canonical record is on disk, beside the (empty) working tree.
    record = json.loads(store.backend.get(layout.agent_key(made.agent_id)))
    assert record["agentId"] == made.agent_id
    assert record["memoryStoreId"] == made.memory_store_id
    assert tree_root(store, made.agent_id).is_dir()


def test_agent_name_defaults_to_its_id(store: Store) -> None:
    assert store.create_agent("bots/one").name == "bots/one"


def test_duplicate_agent_is_a_conflict(store: Store, agent: str) -> None:
    store.write(agent, A, b"keep", actor=ACTOR)
    with pytest.raises(Conflict):
        store.create_agent(agent)
    assert store.read(agent, A).content == b"keep"
    assert store.get_agent(agent).revision == 1


def test_invalid_agent_id_is_refused(store: Store) -> None:
    with pytest.raises(InvalidRequest):
        store.create_agent("../escape")
    assert not (store.data_dir / "agents").exists() or not any(
        (store.data_dir / "agents").iterdir()
    )


def test_list_agents_by_prefix_and_cursor(store: Store) -> None:
    ids = ["users/alice/assistant", "users/alice/planner", "users/alice2/x", "users/bob/x", "z"]
    for agent_id in reversed(ids):
        store.create_agent(agent_id)
    assert [a.agent_id for a in store.list_agents()] == ids
    assert [a.agent_id for a in store.list_agents("users/alice/")] == ids[:2]
    assert [a.agent_id for a in store.list_agents("users/")] == ids[:4]
    assert [a.agent_id for a in store.list_agents("nobody")] == []
    first = store.list_agents("users/", limit=2)
    rest = store.list_agents("users/", after=first[-1].agent_id, limit=10)
    assert [a.agent_id for a in first + rest] == ids[:4]


def test_rename_agent_is_a_commit(store: Store, agent: str) -> None:
    renamed = store.rename_agent(agent, "New name", actor="admin")
    assert renamed.name == "New name"
    assert renamed.revision == 1
    assert store.get_agent(agent).name == "New name"
    (entry,) = log_entries(store, agent)
    assert entry["agentName"] == "New name"
    assert entry["actor"] == "admin"
    assert entry["changes"] == []
    # Memory versions are untouched by an agent rename.
    assert store.list_memories(agent) == ([], False)


def test_erase_removes_everything(store: Store, agent: str) -> None:
    store.write(agent, A, b"---\nk: v\n---\nsecret", actor=ACTOR)
    store.write(agent, "/memories/big.md", b"x" * 20_000, actor=ACTOR)
    store.delete(agent, A, actor=ACTOR)
    other = store.create_agent("users/alice/other").agent_id
    store.write(other, A, b"stays", actor=ACTOR)
    assert index_rows(store, agent)["versions"] > 0

    store.erase_agent(agent)

    assert not layout.agent_folder(store.data_dir, agent).exists()
    assert index_rows(store, agent) == dict.fromkeys(TABLES, 0)
    with pytest.raises(NotFound):
        store.get_agent(agent)
    assert [a.agent_id for a in store.list_agents()] == [other]
    assert list(store.backend.list(layout.agent_prefix(agent))) == []
    # Another agent is untouched.
    assert store.read(other, A).content == b"stays"
    with pytest.raises(NotFound):
        store.erase_agent(agent)


def test_recreate_after_erase_starts_fresh(store: Store, agent: str) -> None:
    store.write(agent, A, b"old", actor=ACTOR)
    store.write(agent, A, b"older", actor=ACTOR)
    old_store_id = store.get_agent(agent).memory_store_id
    store.erase_agent(agent)

    again = store.create_agent(agent)
    assert again.revision == 0
    assert again.memory_store_id != old_store_id
    with pytest.raises(NotFound):
        store.versions(agent, A)
    assert store.log(agent) == []
    result = store.write(agent, A, b"new", actor=ACTOR)
    assert result.revision == 1
    assert result.memory.version == 1
    assert [v.version for v in store.versions(agent, A)] == [1]
    assert len(log_keys(store, agent)) == 1
    assert tree_files(store, agent) == {A: b"new"}


def test_unknown_agent_is_not_found_with_a_hint(store: Store) -> None:
    with pytest.raises(NotFound) as caught:
        store.write("users/nobody", A, b"x", actor=ACTOR)
    assert "memfs agents create users/nobody" in caught.value.message
    assert caught.value.field == "agentId"
    for call in (
        lambda: store.read("users/nobody", A),
        lambda: store.list_memories("users/nobody"),
        lambda: store.delete("users/nobody", A, actor=ACTOR),
        lambda: store.log("users/nobody"),
    ):
        with pytest.raises(NotFound, match="create it"):
            call()
    assert not (store.data_dir / "agents").exists() or not any(
        (store.data_dir / "agents").iterdir()
    )


# ---- writing ------------------------------------------------------------------------


def test_write_create_then_update(store: Store, agent: str) -> None:
    first = store.write(agent, A, b"one", actor=ACTOR, message="first")
    assert first.created and first.changed
    assert (first.revision, first.memory.version) == (1, 1)
    assert first.memory.sha256 == sha(b"one")
    second = store.write(agent, A, b"two", actor=ACTOR)
    assert not second.created and second.changed
    assert (second.revision, second.memory.version) == (2, 2)
    memory = store.read(agent, A)
    assert (memory.content, memory.version) == (b"two", 2)
    assert memory.created_at == first.memory.created_at < memory.updated_at


def test_a_write_answers_the_row_the_index_then_holds(store: Store, agent: str) -> None:
    """What a write answers (PUT's body) is what a listing shows afterwards, for a
    create, an update with new metadata, a recreate after a delete, and a no-op."""
    steps = [
        b"---\ndescription: d1\nteam: core\n---\none",
        b"---\ndescription: d2\nrank: 2\n---\ntwo",
        None,
        b"three",
        b"three",
    ]
    for data in steps:
        if data is None:
            store.delete(agent, A, actor=ACTOR)
            continue
        result = store.write(agent, A, data, actor=ACTOR)
        listed = [r for r in store.list_memories(agent, limit=10)[0] if r.path == A]
        assert listed == [result.memory]


def test_create_only(store: Store, agent: str) -> None:
    assert store.write(agent, A, b"one", create_only=True, actor=ACTOR).created
    with pytest.raises(PreconditionFailed):
        store.write(agent, A, b"two", create_only=True, actor=ACTOR)
    assert store.read(agent, A).content == b"one"
    assert store.get_agent(agent).revision == 1
    # A deleted path can be created again.
    store.delete(agent, A, actor=ACTOR)
    assert store.write(agent, A, b"three", create_only=True, actor=ACTOR).created


def test_if_match(store: Store, agent: str) -> None:
    store.write(agent, A, b"one", actor=ACTOR)
    with pytest.raises(PreconditionFailed) as caught:
        store.write(agent, A, b"two", if_match=sha(b"other"), actor=ACTOR)
    assert caught.value.field == "If-Match"
    assert store.read(agent, A).content == b"one"
    assert store.get_agent(agent).revision == 1
    assert len(log_keys(store, agent)) == 1
    assert tree_files(store, agent) == {A: b"one"}

    ok = store.write(agent, A, b"two", if_match=sha(b"one"), actor=ACTOR)
    assert ok.memory.version == 2
    # The old sha no longer matches: a second writer holding it loses.
    with pytest.raises(PreconditionFailed):
        store.write(agent, A, b"three", if_match=sha(b"one"), actor=ACTOR)
    # If-Match on a path that does not exist fails too.
    with pytest.raises(PreconditionFailed):
        store.write(agent, B, b"x", if_match=sha(b"x"), actor=ACTOR)
    assert store.read(agent, A).content == b"two"


def test_if_match_must_be_a_sha256(store: Store, agent: str) -> None:
    store.write(agent, A, b"one", actor=ACTOR)
    for bad in ["", "abc", sha(b"one").upper(), '"' + sha(b"one") + '"']:
        with pytest.raises(InvalidRequest):
            store.write(agent, A, b"two", if_match=bad, actor=ACTOR)
    assert store.read(agent, A).content == b"one"


def test_identical_content_is_a_no_op(store: Store, agent: str) -> None:
    first = store.write(agent, A, b"same", actor=ACTOR)
    store.write(agent, B, b"other", actor=ACTOR)
    again = store.write(agent, A, b"same", actor=ACTOR)
    assert not again.changed and not again.created
    assert again.revision == 2
    assert again.memory == first.memory
    assert store.get_agent(agent).revision == 2
    assert len(log_keys(store, agent)) == 2
    assert [v.version for v in store.versions(agent, A)] == [1]
    # The retry may carry the precondition it had the first time, and still succeed.
    retry = store.write(agent, A, b"same", if_match=sha(b"same"), actor=ACTOR)
    assert not retry.changed


def test_delete_makes_a_tombstone(store: Store, agent: str) -> None:
    store.write(agent, A, b"one", actor=ACTOR)
    store.write(agent, A, b"two", actor=ACTOR)
    result = store.delete(agent, A, actor=ACTOR, message="bye")
    assert result.revision == 3
    with pytest.raises(NotFound):
        store.read(agent, A)
    versions = store.versions(agent, A)
    assert [(v.version, v.operation, v.sha256) for v in versions] == [
        (1, "created", sha(b"one")),
        (2, "modified", sha(b"two")),
        (3, "deleted", None),
    ]
    assert versions[2].message == "bye"
    assert versions[1].valid_to == versions[2].valid_from
    assert versions[2].valid_to is None
    assert store.read(agent, A, version=1).content == b"one"
    assert store.read(agent, A, version=2).content == b"two"
    with pytest.raises(NotFound, match="deletion"):
        store.read(agent, A, version=3)
    with pytest.raises(NotFound):
        store.read(agent, A, version=4)
    assert tree_files(store, agent) == {}


def test_delete_missing_and_delete_with_if_match(store: Store, agent: str) -> None:
    with pytest.raises(NotFound):
        store.delete(agent, A, actor=ACTOR)
    store.write(agent, A, b"one", actor=ACTOR)
    with pytest.raises(PreconditionFailed):
        store.delete(agent, A, if_match=sha(b"nope"), actor=ACTOR)
    assert store.read(agent, A).content == b"one"
    store.delete(agent, A, if_match=sha(b"one"), actor=ACTOR)
    with pytest.raises(NotFound):
        store.delete(agent, A, actor=ACTOR)


def test_versions_continue_after_delete_and_recreate(store: Store, agent: str) -> None:
    store.write(agent, A, b"one", actor=ACTOR)
    store.delete(agent, A, actor=ACTOR)
    again = store.write(agent, A, b"two", actor=ACTOR)
    assert again.created
    assert again.memory.version == 3
    assert [(v.version, v.operation) for v in store.versions(agent, A)] == [
        (1, "created"),
        (2, "deleted"),
        (3, "created"),
    ]
    assert store.read(agent, A, version=1).content == b"one"


def test_rename_is_one_commit(store: Store, agent: str) -> None:
    data = b"---\ndescription: moving\ntopic: x\n---\nbody"
    store.write(agent, A, data, actor=ACTOR)
    result = store.rename(agent, A, "/memories/sub/moved.md", actor="mover", message="mv")
    assert result.revision == 2
    assert result.commit is not None and len(result.commit.changes) == 2
    with pytest.raises(NotFound):
        store.read(agent, A)
    moved = store.read(agent, "/memories/sub/moved.md")
    assert moved.content == data
    assert moved.description == "moving"
    assert moved.metadata == {"topic": "x"}
    (_, entry) = log_entries(store, agent)
    changes = entry["changes"]
    assert [(c["path"], c["operation"], c["before"], c["after"]) for c in changes] == [
        (A, "renamed", sha(data), None),
        ("/memories/sub/moved.md", "renamed", None, sha(data)),
    ]
    assert changes[0]["renamedTo"] == "/memories/sub/moved.md"
    assert changes[1]["renamedFrom"] == A
    assert [c.revision for c in store.log(agent)] == [2, 1]
    assert tree_files(store, agent) == {"/memories/sub/moved.md": data}
    assert not (tree_root(store, agent) / "a.md").exists()


def test_rename_refusals_change_nothing(store: Store, agent: str) -> None:
    store.write(agent, A, b"a", actor=ACTOR)
    store.write(agent, B, b"b", actor=ACTOR)
    store.write(agent, "/memories/dir/x.md", b"x", actor=ACTOR)
    with pytest.raises(Conflict):
        store.rename(agent, A, B, actor=ACTOR)
    with pytest.raises(Conflict):
        store.rename(agent, A, "/memories/dir", actor=ACTOR)  # a folder's name
    with pytest.raises(Conflict):
        store.rename(agent, A, "/memories/b.md/inside.md", actor=ACTOR)  # under a file
    with pytest.raises(NotFound):
        store.rename(agent, "/memories/missing.md", "/memories/c.md", actor=ACTOR)
    with pytest.raises(PreconditionFailed):
        store.rename(agent, A, "/memories/c.md", if_match=sha(b"b"), actor=ACTOR)
    with pytest.raises(InvalidRequest):
        store.rename(agent, A, A, actor=ACTOR)
    assert store.get_agent(agent).revision == 3
    assert current(store, agent) == {A: b"a", B: b"b", "/memories/dir/x.md": b"x"}
    assert_tree_matches(store, agent)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("/memories/a", "/memories/a/b.md"),
        ("/memories/a/b.md", "/memories/a"),
        ("/memories/x/y/z.md", "/memories/x/y"),
        ("/memories/x/y", "/memories/x/y/z/w.md"),
    ],
)
def test_file_and_folder_cannot_share_a_name(
    store: Store, agent: str, first: str, second: str
) -> None:
    store.write(agent, first, b"1", actor=ACTOR)
    with pytest.raises(Conflict):
        store.write(agent, second, b"2", actor=ACTOR)
    assert current(store, agent) == {first: b"1"}
    assert store.get_agent(agent).revision == 1
    # Once the first is gone, the second is welcome.
    store.delete(agent, first, actor=ACTOR)
    store.write(agent, second, b"2", actor=ACTOR)
    assert current(store, agent) == {second: b"2"}
    assert_tree_matches(store, agent)


def test_revisions_increase_by_one_per_agent(store: Store, agent: str) -> None:
    other = store.create_agent("users/bob/assistant").agent_id
    revisions = [
        store.write(agent, A, b"1", actor=ACTOR).revision,
        store.write(other, A, b"1", actor=ACTOR).revision,
        store.write(agent, B, b"2", actor=ACTOR).revision,
        store.rename(agent, B, "/memories/c.md", actor=ACTOR).revision,
        store.delete(agent, A, actor=ACTOR).revision,
        store.write(other, A, b"2", actor=ACTOR).revision,
    ]
    assert revisions == [1, 1, 2, 3, 4, 2]
    assert [c.revision for c in store.log(agent)] == [4, 3, 2, 1]
    revisions = [layout.revision_of(k.rsplit("/", 1)[1]) for k in log_keys(store, agent)]
    assert revisions == [1, 2, 3, 4]


def test_timestamps_strictly_increase_when_the_clock_steps_back(
    store: Store, agent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store.write(agent, A, b"0", actor=ACTOR)
    start = parse_ts(str(log_entries(store, agent)[0]["ts"]))
    ticks: Iterator[int] = iter(range(start, 0, -3_600_000_000))  # an hour back per call
    monkeypatch.setattr(memfs.core.store, "now_us", lambda: next(ticks))
    for n in range(1, 6):
        store.write(agent, A, str(n).encode(), actor=ACTOR)
    stamps = [str(e["ts"]) for e in log_entries(store, agent)]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", s) for s in stamps), stamps
    micros = [parse_ts(s) for s in stamps]
    assert all(a < b for a, b in itertools.pairwise(micros)), stamps
    versions = store.versions(agent, A)
    assert [v.valid_from for v in versions] == micros


@pytest.mark.on_disk
def test_log_entries_on_disk(store: Store, agent: str) -> None:
    store.write(agent, A, b"---\ndescription: d\n---\none", actor="alice", message="add a")
    store.write(agent, A, b"two", actor="bob", message="edit a")
    store.delete(agent, A, actor="carol", message="drop a")
    # One segment file holds the three entries, as framed payloads in commit order.
    (segment,) = segment_files(store.data_dir, agent)
    assert segment.name == "00000000000000000001.seg"
    stored = [(magic, rev, payload) for magic, rev, _at, payload in frames(segment)]
    assert [(m, r) for m, r, _p in stored] == [(b"MFS1", 1), (b"MFS1", 2), (b"MFS1", 3)]
    assert [store.backend.get(layout.log_key(agent, r)) for r in (1, 2, 3)] == [
        p for _m, _r, p in stored
    ]
    assert not list((store.data_dir / layout.log_prefix(agent)).glob("*.json"))
    entries = log_entries(store, agent)
    assert [(e["revision"], e["actor"], e["message"]) for e in entries] == [
        (1, "alice", "add a"),
        (2, "bob", "edit a"),
        (3, "carol", "drop a"),
    ]
    one, two = sha(b"---\ndescription: d\n---\none"), sha(b"two")
    summary = [
        [(c["path"], c["operation"], c["version"], c["before"], c["after"]) for c in e["changes"]]
        for e in entries
    ]
    assert summary == [
        [(A, "created", 1, None, one)],
        [(A, "modified", 2, one, two)],
        [(A, "deleted", 3, two, None)],
    ]
    assert entries[0]["agentId"] == agent
    assert entries[0]["changes"][0]["description"] == "d"
    # What the store answers agrees with the disk.
    assert [(c.revision, c.actor, c.message) for c in store.log(agent)] == [
        (3, "carol", "drop a"),
        (2, "bob", "edit a"),
        (1, "alice", "add a"),
    ]
    assert store.commit_at(agent, 2).changes[0].before == one


@pytest.mark.on_disk
def test_large_content_is_a_blob_object(store: Store, agent: str) -> None:
    big = ("# big\n" + "é ünïcode line\r\n" * 1200).encode()
    assert len(big) > 16 * 1024
    store.write(agent, A, big, actor=ACTOR)
    blob = store.data_dir / layout.blob_key(agent, sha(big))
    assert blob.parent.parent.name == "objects"
    assert blob.read_bytes() == big
    (entry,) = log_entries(store, agent)
    assert "content" not in entry["changes"][0]
    assert store.read(agent, A).content == big
    # Reads do not depend on the index's cache of contents.
    conn = sqlite3.connect(store.index.path)
    conn.execute("DELETE FROM blobs")
    conn.commit()
    conn.close()
    assert store.read(agent, A).content == big
    assert tree_files(store, agent) == {A: big}


@pytest.mark.on_disk
def test_a_read_never_serves_an_index_copy_that_fails_its_sha256(store: Store, agent: str) -> None:
    """Store.read takes the content from the index's cache in its one lookup and checks
    it there: a flipped cache is replaced by the blob object, or refused when the log's
    inline copy was the only other one."""
    big = ("# big\n" + "line of a large memory\n" * 1200).encode()
    store.write(agent, A, big, actor=ACTOR)
    store.write(agent, B, b"small words", actor=ACTOR)
    conn = sqlite3.connect(store.index.path)
    conn.execute("UPDATE blobs SET content=CAST('flipped' AS BLOB)")
    conn.commit()
    conn.close()
    assert store.read(agent, A).content == big
    with pytest.raises(Damaged, match="memfs fsck"):
        store.read(agent, B)


def test_small_content_is_inline(store: Store, agent: str) -> None:
    exactly = b"x" * (16 * 1024)
    store.write(agent, A, exactly, actor=ACTOR)
    (entry,) = log_entries(store, agent)
    assert entry["changes"][0]["content"] == exactly.decode()
    assert not (store.data_dir / layout.agent_prefix(agent) / "objects").exists()


def test_working_tree_follows_every_change(store: Store, agent: str) -> None:
    steps: list[Callable[[], object]] = [
        lambda: store.write(agent, A, b"a1", actor=ACTOR),
        lambda: store.write(agent, "/memories/x/y/z.md", b"z1", actor=ACTOR),
        lambda: store.write(agent, A, b"a2", actor=ACTOR),
        lambda: store.write(agent, "/memories/x/big.md", b"b" * 20_000, actor=ACTOR),
        lambda: store.rename(agent, "/memories/x/y/z.md", "/memories/w.md", actor=ACTOR),
        lambda: store.rename(agent, "/memories/x/big.md", "/memories/q/big.md", actor=ACTOR),
        lambda: store.delete(agent, A, actor=ACTOR),
    ]
    for step in steps:
        step()
        assert_tree_matches(store, agent)
    # Emptied folders are removed, as in the store.
    assert sorted(p.name for p in tree_root(store, agent).iterdir()) == ["q", "w.md"]


class FailingLog(memfs.canonical.backend.LocalBackend):
    """Fails to publish log entries, as a full or broken disk would."""

    def put_if_absent(self, key: str, data: bytes) -> bool:
        if "/.memfs/log/" in key:
            raise OSError(28, "No space left on device")
        return super().put_if_absent(key, data)


def test_a_commit_that_fails_leaves_the_tree_as_it_was(tmp_path: Path) -> None:
    """Tree files made while the entry was being published are removed with the
    folders made for them when the entry can't be written."""
    data = tmp_path / "data"
    store = Store(data, backend=FailingLog(data))
    try:
        store.create_agent("a")
        with pytest.raises(OSError, match="No space"):
            store.write("a", "/memories/new/folder/x.md", b"lost", actor=ACTOR)
        assert list(tree_root(store, "a").rglob("*")) == []
        assert store.list_memories("a", limit=10)[0] == []
    finally:
        store.close()


def test_hand_edit_is_moved_aside_not_lost(store: Store, agent: str) -> None:
    store.write(agent, A, b"v1", actor=ACTOR)
    store.write(agent, B, b"b1", actor=ACTOR)
    file_a = tree_root(store, agent) / "a.md"
    file_a.write_bytes(b"edited by hand")
    result = store.write(agent, A, b"v2", actor=ACTOR)
    assert file_a.read_bytes() == b"v2"
    assert (tree_root(store, agent) / f"a.md.conflict-r{result.revision}").read_bytes() == (
        b"edited by hand"
    )
    # A hand edit of a file memfs then deletes survives the same way.
    file_b = tree_root(store, agent) / "b.md"
    file_b.write_bytes(b"b by hand")
    deleted = store.delete(agent, B, actor=ACTOR)
    assert not file_b.exists()
    assert (tree_root(store, agent) / f"b.md.conflict-r{deleted.revision}").read_bytes() == (
        b"b by hand"
    )


def test_a_hand_made_file_where_memfs_creates_is_kept(store: Store, agent: str) -> None:
    (tree_root(store, agent) / "a.md").write_bytes(b"mine")
    result = store.write(agent, A, b"theirs", actor=ACTOR)
    assert (tree_root(store, agent) / "a.md").read_bytes() == b"theirs"
    assert (tree_root(store, agent) / f"a.md.conflict-r{result.revision}").read_bytes() == b"mine"


def test_a_hand_made_folder_where_memfs_writes_a_file_is_kept(store: Store, agent: str) -> None:
    (tree_root(store, agent) / "a.md").mkdir()
    (tree_root(store, agent) / "a.md" / "inside.txt").write_bytes(b"mine")
    result = store.write(agent, A, b"theirs", actor=ACTOR)
    assert (tree_root(store, agent) / "a.md").read_bytes() == b"theirs"
    aside = tree_root(store, agent) / f"a.md.conflict-r{result.revision}"
    assert (aside / "inside.txt").read_bytes() == b"mine"


def _orphan(
    store: Store, agent_id: str, revision: int, path: str, data: bytes, *, old: bytes | None = None
) -> None:
    """Leave log entry ``revision`` as a writer killed right after creating it would: it
    creates ``path`` with ``data``, or (with ``old``, its current content) modifies it."""
    version = 1 if old is None else max(v.version for v in store.versions(agent_id, path)) + 1
    commit = Commit(
        agent_id=agent_id,
        revision=revision,
        ts=store.get_agent(agent_id).last_ts + 1,
        actor="crashed",
        message="orphan",
        changes=(
            Change(
                path=path,
                operation=CREATED if old is None else MODIFIED,
                version=version,
                before=None if old is None else sha(old),
                after=sha(data),
                size=len(data),
                content=data.decode(),
            ),
        ),
    )
    assert store.backend.put_if_absent(layout.log_key(agent_id, revision), commit.to_bytes())


def test_orphan_log_entry_is_caught_up_by_the_next_write(store: Store, agent: str) -> None:
    store.write(agent, A, b"one", actor=ACTOR)
    _orphan(store, agent, 2, "/memories/orphan.md", b"left behind")
    assert store.get_agent(agent).revision == 1  # not indexed yet
    result = store.write(agent, B, b"next", actor=ACTOR)
    assert result.revision == 3
    assert store.read(agent, "/memories/orphan.md").content == b"left behind"
    assert [(c.revision, c.actor) for c in store.log(agent)] == [
        (3, ACTOR),
        (2, "crashed"),
        (1, ACTOR),
    ]
    assert_tree_matches(store, agent)


def test_answers_that_write_nothing_are_judged_after_an_orphan_entry(
    store: Store, agent: str
) -> None:
    """A commit plans on the index's head without probing the log; a no-op or a refusal
    must still not be judged on a head an unindexed entry has moved on."""
    orphan = "/memories/orphan.md"
    _orphan(store, agent, 1, orphan, b"left behind")
    # Stale head: the path does not exist, so a delete would be refused with 404.
    deleted = store.delete(agent, orphan, actor=ACTOR)
    assert deleted.revision == 2
    with pytest.raises(NotFound):
        store.read(agent, orphan)
    # Stale head: writing the content the path had would be a no-op; it is a change.
    store.write(agent, A, b"one", actor=ACTOR)  # revision 3
    _orphan(store, agent, 4, A, b"two", old=b"one")
    result = store.write(agent, A, b"one", actor=ACTOR)
    assert result.changed and result.revision == 5
    assert store.read(agent, A).content == b"one"
    # Stale head: an If-Match on the old content must fail against the new one.
    _orphan(store, agent, 6, A, b"three", old=b"one")
    with pytest.raises(PreconditionFailed):
        store.write(agent, A, b"four", if_match=sha(b"one"), actor=ACTOR)
    assert store.read(agent, A).content == b"three"
    assert_tree_matches(store, agent)


def test_orphan_log_entry_is_caught_up_by_sync(store: Store, agent: str) -> None:
    store.write(agent, A, b"one", actor=ACTOR)
    _orphan(store, agent, 2, "/memories/orphan.md", b"left behind")
    with pytest.raises(NotFound):
        store.read(agent, "/memories/orphan.md")
    assert store.sync(agent) == 1
    assert store.get_agent(agent).revision == 2
    assert store.read(agent, "/memories/orphan.md").content == b"left behind"
    assert [v.operation for v in store.versions(agent, "/memories/orphan.md")] == ["created"]
    assert_tree_matches(store, agent)


def test_sync_applies_orphans_of_every_agent(store: Store, agent: str) -> None:
    other = store.create_agent("users/bob/assistant").agent_id
    store.write(agent, A, b"one", actor=ACTOR)
    _orphan(store, agent, 2, "/memories/orphan.md", b"left")
    _orphan(store, other, 1, "/memories/orphan.md", b"bob's")
    assert store.sync() == 2
    assert store.get_agent(agent).revision == 2
    assert store.get_agent(other).revision == 1
    assert store.read(agent, "/memories/orphan.md").content == b"left"
    assert store.read(other, "/memories/orphan.md").content == b"bob's"
    assert tree_files(store, other) == {"/memories/orphan.md": b"bob's"}
    assert store.sync() == 0  # idempotent


# ---- apply: several operations, one commit -------------------------------------------


def test_apply_is_one_commit(store: Store, agent: str) -> None:
    store.write(agent, A, b"a", actor=ACTOR)
    result = store.apply(
        agent,
        [
            Put(B, b"b"),
            Put("/memories/c/d.md", b"d"),
            Move(A, "/memories/e.md"),
        ],
        actor=ACTOR,
        message="batch",
    )
    assert result.revision == 2
    assert current(store, agent) == {B: b"b", "/memories/c/d.md": b"d", "/memories/e.md": b"a"}
    (top,) = store.log(agent, limit=1)
    assert top.message == "batch" and len(top.changes) == 4
    assert_tree_matches(store, agent)


@pytest.mark.parametrize(
    "failing",
    [
        Delete("/memories/missing.md"),
        Put(C, b"x", create_only=True),
        Put(C, b"x", if_match="0" * 64),
        Put("/memories/b.md/under-a-file.md", b"x"),
        Put("/memories/new.md", b"\xff"),
        Put("/memories/new.md", b"---\na: b: c\n---\n"),
        Move("/memories/missing.md", "/memories/z.md"),
    ],
)
def test_apply_is_all_or_nothing(store: Store, agent: str, failing: Put | Delete | Move) -> None:
    store.write(agent, A, b"a", actor=ACTOR)
    store.write(agent, C, b"c", actor=ACTOR)
    before_tree = tree_files(store, agent)
    ops: list[Put | Delete | Move] = [
        Put("/memories/one.md", b"1"),
        Delete(A),
        Put(B, b"b"),
        failing,
    ]
    with pytest.raises((NotFound, PreconditionFailed, Conflict, InvalidRequest)):
        store.apply(agent, ops, actor=ACTOR)
    assert store.get_agent(agent).revision == 2
    assert current(store, agent) == {A: b"a", C: b"c"}
    assert tree_files(store, agent) == before_tree
    assert len(log_keys(store, agent)) == 2


def test_apply_refuses_empty_and_repeated_paths(store: Store, agent: str) -> None:
    with pytest.raises(InvalidRequest):
        store.apply(agent, [], actor=ACTOR)
    with pytest.raises(InvalidRequest):
        store.apply(agent, [Put(A, b"1"), Put(A, b"2")], actor=ACTOR)
    with pytest.raises(Conflict):
        store.apply(agent, [Put("/memories/x", b"1"), Put("/memories/x/y.md", b"2")], actor=ACTOR)
    assert store.get_agent(agent).revision == 0


def test_empty_content_round_trips(store: Store, agent: str) -> None:
    store.write(agent, A, b"", actor=ACTOR)
    assert store.read(agent, A).content == b""
    store.rename(agent, A, B, actor=ACTOR)
    assert store.read(agent, B).content == b""
    assert store.read(agent, A, version=1).content == b""
    assert tree_files(store, agent) == {B: b""}


def test_version_numbers_must_be_positive(store: Store, agent: str) -> None:
    store.write(agent, A, b"x", actor=ACTOR)
    for bad in (0, -1):
        with pytest.raises(InvalidRequest):
            store.read(agent, A, version=bad)


def test_a_read_by_path_keeps_no_snapshot_open_between_reads(tmp_path: Path) -> None:
    """A read by path runs outside a transaction, on the thread's connection and its
    one session object: each read must end its statement, so a write made through
    another connection (another store on the same data folder, as another process) is
    seen by the next read, and a checkpoint of the index is not kept waiting by a
    reader that sits idle."""
    data = tmp_path / "data"
    reader = Store(data)
    writer: Store | None = None
    try:
        agent = reader.create_agent("users/alice/assistant").agent_id
        reader.write(agent, "/memories/a.md", b"one", actor="t")
        reader.write(agent, "/memories/b.md", b"bee", actor="t")
        assert reader.read(agent, "/memories/a.md").content == b"one"
        writer = Store(data)
        writer.write(agent, "/memories/a.md", b"two", actor="t")
        assert reader.read(agent, "/memories/a.md").content == b"two"
        assert reader.read(agent, "/memories/b.md").content == b"bee"
        conn = sqlite3.connect(layout.index_path(data))
        try:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            conn.close()
        assert busy == 0
    finally:
        reader.close()
        if writer is not None:
            writer.close()
