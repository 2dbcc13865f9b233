"""Derived state is rebuildable, canonical damage is reported and never "repaired",
and hand edits in the working tree are neither lost nor mistaken for damage."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from memfs.canonical import layout
from memfs.canonical.durable import TEMP_PREFIX
from memfs.core import healing, inspect, maintenance
from memfs.core.search import search
from memfs.core.store import Delete, Put, Store
from memfs.core.tokens import Signer
from memfs.derived.index import FolderEntry, MemoryRow
from memfs.domain import paths
from memfs.domain.commits import LOG_HEAD
from memfs.errors import Conflict, Damaged, InvalidRequest, NotFound
from segment_files import as_file_entry, drop_frame, flip_entry

ACTOR = "test"
BIG = ("# big\n" + "line with ü\n" * 2000).encode()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tree(store: Store, agent_id: str) -> Path:
    return layout.worktree_root(store.data_dir, agent_id)


def populate(store: Store, agent: str) -> None:
    """A history with every kind of change, two agents and a large blob."""
    store.write(
        agent, "/memories/a.md", b"---\ndescription: first\nteam: core\n---\nA1", actor="u1"
    )
    store.write(agent, "/memories/a.md", b"---\ndescription: second\nrank: 2\n---\nA2", actor="u2")
    store.write(agent, "/memories/dir/sub/b.md", b"B1", actor=ACTOR, message="add b")
    store.write(agent, "/memories/dir/big.md", BIG, actor=ACTOR)
    store.write(agent, "/memories/gone.md", b"G1", actor=ACTOR)
    store.delete(agent, "/memories/gone.md", actor=ACTOR, message="rm gone")
    store.write(agent, "/memories/gone.md", b"G3", actor=ACTOR)
    store.rename(agent, "/memories/dir/sub/b.md", "/memories/moved/b.md", actor=ACTOR)
    store.write(agent, "/memories/caf\u00e9.md", b"\xc3\xa9", actor=ACTOR)
    store.rename_agent(agent, "Renamed", actor="admin")
    other = store.create_agent("users/bob/assistant", "Bob").agent_id
    store.write(other, "/memories/a.md", b"bob", actor=ACTOR)
    store.create_agent("users/carol/empty")


def snapshot(store: Store) -> dict[str, Any]:
    """Everything the index answers, in full."""
    out: dict[str, Any] = {"agents": [dataclasses.asdict(a) for a in store.list_agents()]}
    for agent in store.list_agents():
        a = agent.agent_id
        ever: set[str] = set()
        for commit in store.log(a):
            ever.update(str(c["path"]) for c in commit.changes)
        listings: dict[str, Any] = {}
        for folder in ("", "dir", "moved", "nothing"):
            for depth_one in (False, True):
                page, more = store.list_memories(a, folder, depth_one=depth_one, limit=1000)
                listings[f"{folder}:{depth_one}"] = (
                    [dataclasses.asdict(i) for i in page],
                    more,
                    store.count_memories(a, folder, depth_one=depth_one),
                )
        listings["filter"] = store.list_memories(a, filters=[("rank", "2")])
        reads: dict[str, Any] = {}
        versions: dict[str, Any] = {}
        for path in sorted(ever):
            rows = store.versions(a, path)
            versions[path] = [dataclasses.asdict(v) for v in rows]
            for v in rows:
                if v.sha256 is not None:
                    reads[f"{path}@{v.version}"] = dataclasses.asdict(
                        store.read(a, path, version=v.version)
                    )
            try:
                reads[path] = dataclasses.asdict(store.read(a, path))
            except NotFound:
                reads[path] = None
        out[a] = {
            "agent": dataclasses.asdict(store.get_agent(a)),
            "stats": store.agent_stats(a),
            "listings": listings,
            "reads": reads,
            "versions": versions,
            "log": [dataclasses.asdict(c) for c in store.log(a)],
            "log_of_a": [dataclasses.asdict(c) for c in store.log(a, path="/memories/a.md")],
        }
    return out


def remove_index(data_dir: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(layout.index_path(data_dir)) + suffix).unlink(missing_ok=True)


def sql(store: Store, statement: str) -> None:
    conn = sqlite3.connect(store.index.path)
    try:
        conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


def test_reindex_rebuilds_exactly_the_same_answers(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = Store(data)
    agent = store.create_agent("users/alice/assistant").agent_id
    populate(store, agent)
    before = snapshot(store)
    assert before[agent]["agent"]["name"] == "Renamed"
    assert before[agent]["listings"][":False"][2] == 5
    store.close()

    remove_index(data)
    reopened = Store(data)
    try:
        assert reopened.list_agents() == []  # a fresh index knows nothing yet
        rebuilt = maintenance.reindex(reopened)
        assert (rebuilt.agents, rebuilt.commits, rebuilt.damaged) == (3, 11, [])
        assert snapshot(reopened) == before
        # Writing goes on at the next revision, as if nothing happened.
        result = reopened.write(agent, "/memories/new.md", b"n", actor=ACTOR)
        assert result.revision == before[agent]["agent"]["revision"] + 1
        assert maintenance.fsck(reopened).ok
    finally:
        reopened.close()


def table_rows(data: Path, table: str) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(layout.index_path(data))
    try:
        return conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2, 3").fetchall()
    finally:
        conn.close()


def test_reindex_writes_the_rows_the_live_commits_wrote(tmp_path: Path) -> None:
    """The bulk load's own statements (one JSON walk per commit for its log columns)
    leave every row byte for byte as the commits applied live did: short and long
    commits (more changes than the log's head keeps), inline and blob contents,
    non-ASCII text, metadata, tombstones and renames."""
    data = tmp_path / "data"
    store = Store(data)
    agent = store.create_agent("users/alice/assistant").agent_id
    populate(store, agent)
    many = [Put(f"/memories/many/n{i:02d}-\u00e9.md", f"n{i} \u2028 \"q\"".encode()) for i in range(25)]
    store.apply(agent, many, actor=ACTOR, message="twenty-five at once")
    store.apply(agent, [Delete(p.path) for p in many[:21]], actor=ACTOR, message="and gone")
    # One-change commits have a statement of their own: escapes, a line separator and a
    # metadata key named like the inline content's.
    odd = '---\ndescription: "q \\" \u2028 \u00e9"\ncontent: kept\n---\nbody \u2028 "q" \\ \u00e9'
    store.write(agent, "/memories/odd.md", odd.encode(), actor=ACTOR, message='one "odd"')
    tables = ("commits", "versions", "memories", "memory_meta", "blobs", "links", "agents")
    before = {t: table_rows(data, t) for t in tables}
    heads = [r for r in before["commits"] if r[6] > LOG_HEAD]
    assert len(heads) == 2 and all(len(json.loads(r[7])) == LOG_HEAD for r in heads)
    (one,) = [r for r in before["commits"] if r[5] == 'one "odd"']
    assert one[6] == 1 and '"metadata":{"content":"kept"}' in one[8] and "body" not in one[8]
    assert all('"content"' not in r[7] + r[8] for r in before["commits"] if r != one)
    store.close()

    remove_index(data)
    reopened = Store(data)
    try:
        maintenance.reindex(reopened)
        assert {t: table_rows(data, t) for t in tables} == before
    finally:
        reopened.close()


def search_rows(data: Path) -> list[tuple[Any, ...]]:
    """The full-text rows of the index file: each doc's key with its indexed text."""
    conn = sqlite3.connect(layout.index_path(data))
    try:
        rows = conn.execute(
            "SELECT d.agent_id, d.path, d.sha256, f.path, f.description, f.body"
            " FROM search_docs d JOIN search_fts f ON f.rowid=d.doc ORDER BY 1, 2"
        ).fetchall()
        (docs,) = conn.execute("SELECT COUNT(*) FROM search_docs").fetchone()
        (texts,) = conn.execute("SELECT COUNT(*) FROM search_fts").fetchone()
    finally:
        conn.close()
    assert docs == texts == len(rows)  # every doc has its one text row, none is left over
    return rows


def test_reindex_keeps_metadata_that_compare_equal_apart_and_the_search_rows(
    tmp_path: Path,
) -> None:
    """Reindex encodes each distinct metadata once: true, 1, 1.0, 0.0 and -0.0 (equal
    to Python) stay what each commit wrote, and the full-text rows are rebuilt alike."""
    data = tmp_path / "data"
    store = Store(data)
    agent = store.create_agent("users/alice/assistant").agent_id
    populate(store, agent)
    spelled = ["true", "1", "1.0", "0.0", "-0.0", "1", "true"]
    for i, value in enumerate(spelled):
        body = f"---\ndescription: m{i}\nv: {value}\n---\nbody words {i}".encode()
        store.write(agent, f"/memories/meta/m{i}.md", body, actor=ACTOR)
    before = snapshot(store)
    kinds = [store.read(agent, f"/memories/meta/m{i}.md").metadata["v"] for i in range(7)]
    assert [repr(v) for v in kinds] == ["True", "1", "1.0", "0.0", "-0.0", "1", "True"]
    # A search first makes the full-text rows the commits left pending (search.flush).
    search(store, Signer(b"k" * 32), agent_id=agent, query="body")
    texts = search_rows(data)
    assert len(texts) == 5 + 1 + 7  # alice's live memories, bob's, the seven
    store.close()

    remove_index(data)
    reopened = Store(data)
    try:
        maintenance.reindex(reopened)
        again = [reopened.read(agent, f"/memories/meta/m{i}.md").metadata["v"] for i in range(7)]
        assert [repr(v) for v in again] == [repr(v) for v in kinds]
        assert snapshot(reopened) == before
        assert search_rows(data) == texts
        assert maintenance.fsck(reopened).ok
    finally:
        reopened.close()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda entry: b"\xff" + entry, "is unreadable"),  # not UTF-8
        (lambda entry: entry[: len(entry) // 2], "is unreadable"),  # torn JSON
        (lambda entry: entry.replace(b'"version":', b'"version":"x",":'), "is unreadable"),
        (lambda entry: entry.replace(b'"format":1', b'"format":9'), "unknown format"),
        (lambda entry: entry.replace(b'"revision":3', b'"revision":4'), "names revision 4"),
    ],
)
def test_reindex_refuses_a_damaged_entry_and_keeps_the_index(
    store: Store, agent: str, damage: Any, message: str
) -> None:
    other = store.create_agent("users/bob/assistant").agent_id
    store.write(other, "/memories/b.md", b"b", actor=ACTOR)
    for i in range(6):
        store.write(agent, f"/memories/m{i}.md", f"m{i}".encode(), actor=ACTOR)
    before = snapshot(store)
    # Damaged as a one-file entry of an older data folder can be (a damaged frame is
    # tests/test_segments.py's).
    as_file_entry(store.data_dir, agent, 3, damage)
    result = maintenance.reindex(store)
    # Only that agent is refused (and its rows kept, an intact copy); the other is rebuilt.
    assert [(a, f) for a, f, _why in result.damaged] == [(agent, layout.log_key(agent, 3))]
    assert message in result.damaged[0][2]
    with pytest.raises(Damaged, match="memfs fsck"):
        store.read(agent, "/memories/m0.md")
    assert store.read(other, "/memories/b.md").content == b"b"
    assert not [t for t in threading.enumerate() if t.name == "memfs-prefetch"]
    # The index's copy restores the entry; the agent serves again, as before.
    repaired = maintenance.fsck(store, repair=True)
    assert any(layout.log_key(agent, 3) in r and "restored" in r for r in repaired.restored)
    assert maintenance.fsck(store).ok
    assert snapshot(store) == before


def test_reindex_refuses_a_gap_in_the_log(store: Store, agent: str) -> None:
    for i in range(4):
        store.write(agent, f"/memories/m{i}.md", f"m{i}".encode(), actor=ACTOR)
    drop_frame(store.data_dir, agent, 2)
    result = maintenance.reindex(store)
    assert len(result.damaged) == 1 and "jumps from 1 to 3" in result.damaged[0][2]


def test_reindex_of_a_live_index_changes_nothing(store: Store, agent: str) -> None:
    populate(store, agent)
    before = snapshot(store)
    maintenance.reindex(store)
    assert snapshot(store) == before


def test_create_agent_adopts_an_unindexed_record(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = Store(data)
    store.create_agent("users/alice/assistant")
    store.close()
    remove_index(data)
    reopened = Store(data)
    try:
        with pytest.raises(Conflict, match="already exists"):
            reopened.create_agent("users/alice/assistant")
        assert reopened.get_agent("users/alice/assistant").revision == 0
    finally:
        reopened.close()


# ---- fsck ---------------------------------------------------------------------------


def test_fsck_is_clean_on_a_healthy_store(store: Store, agent: str) -> None:
    populate(store, agent)
    report = maintenance.fsck(store)
    assert report.ok
    assert (report.damaged, report.derived, report.uncommitted, report.repaired) == ([], [], [], [])
    assert report.agents == 3
    assert report.commits == 11
    assert report.objects == 1  # the one content too large to inline
    assert report.to_json()["ok"] is True


def test_flipped_byte_in_a_blob_is_restored_from_the_index_copy(store: Store, agent: str) -> None:
    store.write(agent, "/memories/big.md", BIG, actor=ACTOR)
    blob = store.data_dir / layout.blob_key(agent, sha(BIG))
    raw = bytearray(blob.read_bytes())
    raw[100] ^= 0x01
    blob.write_bytes(bytes(raw))

    report = maintenance.fsck(store)
    assert not report.ok
    assert any(
        sha(BIG)[2:] in d and "does not match" in d and "fix: memfs fsck --repair" in d
        for d in report.damaged
    )

    repaired = maintenance.fsck(store, repair=True)
    assert repaired.ok, repaired.damaged
    assert any(sha(BIG)[2:] in r and "restored from the index" in r for r in repaired.restored)
    assert blob.read_bytes() == BIG
    assert maintenance.fsck(store).ok


def test_flipped_blob_without_an_intact_copy_stays_damage(store: Store, agent: str) -> None:
    store.write(agent, "/memories/big.md", BIG, actor=ACTOR)
    blob = store.data_dir / layout.blob_key(agent, sha(BIG))
    raw = bytearray(blob.read_bytes())
    raw[100] ^= 0x01
    blob.write_bytes(bytes(raw))
    sql(store, "DELETE FROM blobs")  # the index's copy is gone too
    repaired = maintenance.fsck(store, repair=True)
    assert not repaired.ok
    assert any("memfs agents rm" in d for d in repaired.damaged)
    assert blob.read_bytes() == bytes(raw)  # never rewritten without an intact copy
    with pytest.raises(Damaged, match="memfs fsck"):
        store.read(agent, "/memories/big.md")


def test_missing_blob_is_damage(store: Store, agent: str) -> None:
    store.write(agent, "/memories/big.md", BIG, actor=ACTOR)
    (store.data_dir / layout.blob_key(agent, sha(BIG))).unlink()
    report = maintenance.fsck(store)
    assert not report.ok
    assert any("referenced by the log is missing" in d for d in report.damaged)
    assert maintenance.fsck(store, repair=True).ok  # restored from the index's copy
    assert store.read(agent, "/memories/big.md").content == BIG


def test_missing_log_entry_in_the_middle_is_damage(store: Store, agent: str) -> None:
    for n in range(3):
        store.write(agent, f"/memories/{n}.md", b"x", actor=ACTOR)
    drop_frame(store.data_dir, agent, 2)
    report = maintenance.fsck(store)
    assert not report.ok
    assert any("jumps from 1 to 3" in d for d in report.damaged)
    assert not maintenance.fsck(store, repair=True).ok


def test_tampered_log_entry_is_damage(store: Store, agent: str) -> None:
    store.write(agent, "/memories/a.md", b"original", actor=ACTOR)
    key = layout.log_key(agent, 1)
    flip_entry(store.data_dir, agent, 1, b"original", b"0riginal")  # its checksum fails
    report = maintenance.fsck(store)
    assert not report.ok
    assert any(key in d and "checksum does not match" in d for d in report.damaged)
    repaired = maintenance.fsck(store, repair=True)
    assert repaired.ok
    assert b"original" in store.backend.get(key)
    # A one-file entry an older memfs wrote, tampered with: its content's sha256 tells.
    entry = store.data_dir / key
    entry.write_bytes(entry.read_bytes().replace(b"original", b"0riginal"))
    report = maintenance.fsck(store)
    assert any("inline content does not match" in d for d in report.damaged)
    assert maintenance.fsck(store, repair=True).ok
    assert b"original" in entry.read_bytes()


def test_lost_index_rows_are_derived_and_repaired(store: Store, agent: str) -> None:
    populate(store, agent)
    before = snapshot(store)
    sql(store, "DELETE FROM memories")
    assert store.list_memories(agent) == ([], False)

    report = maintenance.fsck(store)
    assert report.damaged == []
    assert report.derived and not report.ok
    assert any("differ from the log" in d for d in report.derived)

    repaired = maintenance.fsck(store, repair=True)
    assert repaired.ok
    assert len(repaired.repaired) == len(repaired.derived) > 0
    clean = maintenance.fsck(store)
    assert clean.ok and clean.derived == []
    assert snapshot(store) == before


def test_a_stale_listing_in_the_index_is_derived_and_repaired(store: Store, agent: str) -> None:
    """List pages are the rows' stored listing JSON: one that no longer says what its
    row says (a hand-edited index, a bug) is found by fsck and rebuilt by --repair."""
    populate(store, agent)
    with store.index.read() as conn:
        (path, listing) = conn.execute(
            "SELECT path, listing FROM memories WHERE agent_id=? ORDER BY path LIMIT 1", (agent,)
        ).fetchone()
    sql(store, "UPDATE memories SET listing=replace(listing, '\"version\":', '\"version\":9')")

    report = maintenance.fsck(store)
    assert report.damaged == [] and not report.ok
    assert any("listing" in d and path in d for d in report.derived), report.derived

    assert maintenance.fsck(store, repair=True).ok
    assert maintenance.fsck(store).ok
    with store.index.read() as conn:
        assert conn.execute(
            "SELECT listing FROM memories WHERE agent_id=? AND path=?", (agent, path)
        ).fetchone() == (listing,)


def test_a_stale_memory_count_in_the_index_is_derived_and_repaired(
    store: Store, agent: str
) -> None:
    """The summary's count and bytes are kept in the agent's row: a row that no longer
    agrees with the live memories is found by fsck and rebuilt by --repair."""
    populate(store, agent)
    right = store.agent_stats(agent)
    sql(store, "UPDATE agents SET memory_count=memory_count+5, memory_bytes=7")
    assert store.agent_stats(agent) != right

    report = maintenance.fsck(store)
    assert report.damaged == [] and not report.ok
    assert any("memory count" in d and agent in d for d in report.derived), report.derived

    assert maintenance.fsck(store, repair=True).ok
    assert maintenance.fsck(store).ok
    assert store.agent_stats(agent) == right


def _edges(store: Store, agent: str) -> list[dict[str, Any]]:
    pages = {"edges": inspect.Page(500, None)}
    body = inspect.inspect(store, inspect.Target("agent", agent), pages, None, Signer(b"k" * 32))
    edges: list[dict[str, Any]] = body["graph"]["edges"]
    return edges


def test_a_missing_or_left_over_link_row_is_derived_and_repaired(store: Store, agent: str) -> None:
    """Inspect's edges come from the index's links table: fsck compares it with the
    links of every stored version's content and --repair rebuilds it (reindex)."""
    populate(store, agent)
    store.write(agent, "/memories/l.md", b"[[a]] [b](dir/big.md) [[nowhere]]\n", actor=ACTOR)
    store.write(agent, "/memories/l.md", b"only [[a]]\n", actor=ACTOR)
    right = _edges(store, agent)
    assert len(right) == 4 and maintenance.fsck(store).ok
    sql(store, "DELETE FROM links WHERE path='/memories/l.md' AND version=1 AND idx=1")
    sql(store, f"INSERT INTO links VALUES('{agent}', '/memories/a.md', 2, 0, '/memories/x.md', 1)")
    assert _edges(store, agent) != right

    report = maintenance.fsck(store)
    assert report.damaged == [] and not report.ok
    found = [d for d in report.derived if "link rows" in d]
    assert any("1 link rows" in d and "missing" in d and "/memories/l.md@1" in d for d in found)
    assert any("left over" in d and "/memories/a.md@2 -> /memories/x.md" in d for d in found)
    assert all("fix: memfs reindex" in d for d in found), found

    assert maintenance.fsck(store, repair=True).ok
    assert maintenance.fsck(store).ok
    assert _edges(store, agent) == right


def test_stale_working_tree_file_is_derived_and_repaired(store: Store, agent: str) -> None:
    store.write(agent, "/memories/a.md", b"version one", actor=ACTOR)
    store.write(agent, "/memories/a.md", b"version two", actor=ACTOR)
    file = tree(store, agent) / "a.md"
    file.write_bytes(b"version one")  # what a lost tree update leaves behind

    report = maintenance.fsck(store)
    assert not report.ok and report.uncommitted == []
    assert any("older version" in d for d in report.derived)

    repaired = maintenance.fsck(store, repair=True)
    assert repaired.ok
    assert file.read_bytes() == b"version two"
    assert maintenance.fsck(store).derived == []


def test_hand_edit_is_uncommitted_and_left_alone(store: Store, agent: str) -> None:
    store.write(agent, "/memories/a.md", b"memfs wrote this", actor=ACTOR)
    store.write(agent, "/memories/b.md", b"b", actor=ACTOR)
    file = tree(store, agent) / "a.md"
    file.write_bytes(b"a person wrote this")
    (tree(store, agent) / "b.md").unlink()
    (tree(store, agent) / "notes.md").write_bytes(b"new by hand")

    report = maintenance.fsck(store, repair=True)
    assert report.ok
    assert report.damaged == [] and report.derived == []
    assert sorted(report.uncommitted) == [
        f"{agent} /memories/a.md: modified in the working tree",
        f"{agent} /memories/b.md: deleted in the working tree",
        f"{agent} /memories/notes.md: new file in the working tree",
    ]
    assert file.read_bytes() == b"a person wrote this"
    assert not (tree(store, agent) / "b.md").exists()
    assert (tree(store, agent) / "notes.md").read_bytes() == b"new by hand"
    # The store's own answers are unchanged by the edit.
    assert store.read(agent, "/memories/a.md").content == b"memfs wrote this"


def test_old_stray_temp_files_are_removed_by_repair_young_ones_kept(
    store: Store, agent: str
) -> None:
    store.write(agent, "/memories/dir/a.md", b"a", actor=ACTOR)
    old = time.time() - maintenance.TEMP_GRACE_S - 60
    strays = [
        tree(store, agent) / "dir" / f"{TEMP_PREFIX}x",
        store.data_dir
        / "agents"
        / paths.agent_dir_name(agent)
        / ".memfs"
        / "log"
        / f"{TEMP_PREFIX}y",
    ]
    for stray in strays:
        stray.write_bytes(b"half a file")
        os.utime(stray, (old, old))
    young = tree(store, agent) / "dir" / f"{TEMP_PREFIX}z"
    young.write_bytes(b"a writer may still be at work")

    report = maintenance.fsck(store)
    assert report.ok  # a warning, not damage
    assert sum("interrupted write" in d for d in report.warnings) == 2
    assert not any(str(young) in d for d in report.warnings)
    assert report.uncommitted == []  # a temp file is not a hand edit
    assert maintenance.status(store, agent) == []

    repaired = maintenance.fsck(store, repair=True)
    assert repaired.ok
    assert not any(stray.exists() for stray in strays)
    assert young.exists()
    assert (tree(store, agent) / "dir" / "a.md").read_bytes() == b"a"
    assert maintenance.fsck(store).warnings == []


def test_leftover_of_an_interrupted_erase_is_removed_by_repair(store: Store, agent: str) -> None:
    store.write(agent, "/memories/a.md", b"a", actor=ACTOR)
    keep = store.create_agent("users/bob/assistant").agent_id
    # An erase killed right after removing the record leaves the rest behind.
    store.backend.delete(layout.agent_key(agent))
    sql(store, f"DELETE FROM agents WHERE agent_id='{agent}'")

    report = maintenance.fsck(store)
    assert any("interrupted erase" in d for d in report.derived) and not report.ok
    assert maintenance.fsck(store, repair=True).ok
    assert not layout.agent_folder(store.data_dir, agent).exists()
    assert layout.agent_folder(store.data_dir, keep).exists()
    assert maintenance.fsck(store).ok


# ---- status and commit of hand edits ---------------------------------------------------


def test_status_and_commit_worktree(store: Store, agent: str) -> None:
    store.write(agent, "/memories/keep.md", b"keep", actor=ACTOR)
    store.write(agent, "/memories/edit.md", b"before", actor=ACTOR)
    store.write(agent, "/memories/dir/drop.md", b"drop", actor=ACTOR)
    root = tree(store, agent)
    assert maintenance.status(store, agent) == []
    assert maintenance.commit_worktree(store, agent, actor=ACTOR, message="") is None

    (root / "edit.md").write_bytes(b"after")
    (root / "dir" / "drop.md").unlink()
    (root / "new").mkdir()
    (root / "new" / "added.md").write_bytes(b"---\ndescription: by hand\n---\nadded")
    (root / "bad\\name.md").write_bytes(b"x")  # a backslash is not allowed in a path

    changes = maintenance.status(store, agent)
    assert [(c.state, c.path) for c in changes] == [
        ("invalid", "/memories/bad\\name.md"),
        ("deleted", "/memories/dir/drop.md"),
        ("modified", "/memories/edit.md"),
        ("added", "/memories/new/added.md"),
    ]
    assert "backslash" in changes[0].reason
    with pytest.raises(InvalidRequest, match="bad"):
        maintenance.commit_worktree(store, agent, actor="me", message="hand edits")
    assert store.get_agent(agent).revision == 3  # nothing committed

    (root / "bad\\name.md").unlink()
    result = maintenance.commit_worktree(store, agent, actor="me", message="hand edits")
    assert result is not None and result.commit is not None
    assert result.revision == 4
    assert sorted((c.path, c.operation) for c in result.commit.changes) == [
        ("/memories/dir/drop.md", "deleted"),
        ("/memories/edit.md", "modified"),
        ("/memories/new/added.md", "created"),
    ]
    (top,) = store.log(agent, limit=1)
    assert (top.actor, top.message) == ("me", "hand edits")
    assert maintenance.status(store, agent) == []
    assert store.read(agent, "/memories/edit.md").content == b"after"
    assert store.read(agent, "/memories/new/added.md").description == "by hand"
    with pytest.raises(NotFound):
        store.read(agent, "/memories/dir/drop.md")
    assert store.read(agent, "/memories/keep.md").version == 1
    assert maintenance.fsck(store).uncommitted == []
    page, _ = store.list_memories(agent, depth_one=True)
    assert [(type(i), i.path) for i in page] == [
        (MemoryRow, "/memories/edit.md"),
        (MemoryRow, "/memories/keep.md"),
        (FolderEntry, "/memories/new"),
    ]


def test_status_flags_names_that_are_not_nfc(store: Store, agent: str) -> None:
    (tree(store, agent) / "cafe\u0301.md").write_bytes(b"x")
    (changed,) = maintenance.status(store, agent)
    assert changed.state == "invalid"
    assert "NFC" in changed.reason


def test_commit_worktree_refuses_invalid_content(store: Store, agent: str) -> None:
    (tree(store, agent) / "a.md").write_bytes(b"---\na: b: c\n---\n")
    refusal = "can't commit /memories/a.md: invalid YAML frontmatter on line 2"
    with pytest.raises(InvalidRequest, match=re.escape(refusal)):
        maintenance.commit_worktree(store, agent, actor=ACTOR, message="")
    assert store.get_agent(agent).revision == 0


@pytest.mark.parametrize(
    "spoil",
    [
        lambda path: path.unlink(),
        lambda path: path.write_bytes(b""),
        lambda path: _set_schema(path, 99),
    ],
    ids=["missing", "empty", "unknown schema"],
)
def test_a_lost_index_is_rebuilt_from_the_log_at_start(tmp_path: Path, spoil: Any) -> None:
    data = tmp_path / "data"
    store = Store(data)
    populate(store, store.create_agent("users/alice/assistant").agent_id)
    before = snapshot(store)
    store.close()
    for suffix in ("-wal", "-shm"):
        (data / f"index.sqlite{suffix}").unlink(missing_ok=True)
    spoil(data / "index.sqlite")
    reopened = Store(data)
    try:
        healing.heal(reopened)
        assert snapshot(reopened) == before
    finally:
        reopened.close()


def test_an_index_missing_an_agent_on_disk_is_rebuilt_at_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = Store(data)
    try:
        populate(store, store.create_agent("users/alice/assistant").agent_id)
        before = snapshot(store)
        sql(store, "DELETE FROM agents WHERE agent_id='users/alice/assistant'")
        assert healing.behind(store) is not None
        healing.heal(store)
        assert snapshot(store) == before
        assert healing.behind(store) is None
    finally:
        store.close()


def _set_schema(path: Path, value: int) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE meta SET value=? WHERE key='schema'", (value,))
    conn.close()
