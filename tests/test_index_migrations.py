"""Every older index schema is migrated in place, step by named step, when opened.

An index file written by an older memfs is derived state a user already has on disk:
opening it must upgrade it (not rebuild it from the log) and answer exactly as the
current schema does.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from memfs.core import inspect
from memfs.core.search import search
from memfs.core.store import Delete, Put, Store
from memfs.core.tokens import Signer
from memfs.derived import index
from memfs.derived.index.schema import MIGRATIONS
from memfs.derived.index.search import flush
from memfs.domain.commits import LOG_HEAD

AGENT = "alice"


def _schema_8(conn: sqlite3.Connection) -> None:
    """Before the blobs table was a rowid table: WITHOUT ROWID, keyed by (agent, sha256)."""
    conn.execute(
        "CREATE TABLE blobs_8(agent_id TEXT NOT NULL, sha256 TEXT NOT NULL,"
        " content BLOB NOT NULL, PRIMARY KEY(agent_id, sha256)) WITHOUT ROWID"
    )
    conn.execute("INSERT INTO blobs_8 SELECT agent_id, sha256, content FROM blobs")
    conn.execute("DROP TABLE blobs")
    conn.execute("ALTER TABLE blobs_8 RENAME TO blobs")


def _schema_7(conn: sqlite3.Connection) -> None:
    """Before commits left their full-text rows to a flush: every row made, no table
    of pending paths."""
    _schema_8(conn)
    flush(conn)
    conn.execute("DROP TABLE search_pending")


def _schema_6(conn: sqlite3.Connection) -> None:
    """Before commits rows kept their change count and first changes (the console's log)."""
    _schema_7(conn)
    conn.execute(
        "CREATE TABLE commits_6(agent_id TEXT NOT NULL, revision INTEGER NOT NULL,"
        " ts INTEGER NOT NULL, visible_at INTEGER NOT NULL, actor TEXT NOT NULL,"
        " message TEXT NOT NULL, changes TEXT NOT NULL, PRIMARY KEY(agent_id, revision))"
        " WITHOUT ROWID"
    )
    conn.execute(
        "INSERT INTO commits_6 SELECT agent_id, revision, ts, visible_at, actor, message,"
        " changes FROM commits"
    )
    conn.execute("DROP TABLE commits")
    conn.execute("ALTER TABLE commits_6 RENAME TO commits")
    conn.execute("CREATE INDEX commits_by_visibility ON commits(visible_at)")
    conn.execute("CREATE INDEX commits_by_agent_visibility ON commits(agent_id, visible_at)")


def _schema_5(conn: sqlite3.Connection) -> None:
    """Before the links table of inspect's graph edges."""
    _schema_6(conn)
    conn.execute("DROP TABLE links")


def _schema_4(conn: sqlite3.Connection) -> None:
    """Schema 5's step (fold_accents) is the PostgreSQL index's: the same shape here."""
    _schema_5(conn)


def _schema_3(conn: sqlite3.Connection) -> None:
    """Before agents rows kept their memories' count and bytes."""
    _schema_4(conn)
    conn.execute("ALTER TABLE agents DROP COLUMN memory_count")
    conn.execute("ALTER TABLE agents DROP COLUMN memory_bytes")


def _schema_2(conn: sqlite3.Connection) -> None:
    """Before the full-text index of memory:query."""
    _schema_3(conn)
    conn.execute("DROP TABLE search_fts")
    conn.execute("DROP TABLE search_docs")


def _schema_1(conn: sqlite3.Connection) -> None:
    """Before rows kept their listing JSON, and before the damage table."""
    _schema_2(conn)
    conn.execute("ALTER TABLE memories DROP COLUMN listing")
    conn.execute("DROP TABLE damage")


# How a current index file is turned back into each older schema's shape.
OLDER: dict[int, Callable[[sqlite3.Connection], None]] = {
    1: _schema_1,
    2: _schema_2,
    3: _schema_3,
    4: _schema_4,
    5: _schema_5,
    6: _schema_6,
    7: _schema_7,
    8: _schema_8,
}


def test_the_steps_lead_from_every_older_schema_to_the_current_one() -> None:
    assert [m.source for m in MIGRATIONS] == list(range(1, index.SCHEMA_VERSION))
    assert len({m.name for m in MIGRATIONS}) == len(MIGRATIONS)
    assert set(OLDER) == set(range(1, index.SCHEMA_VERSION)), "a fixture per older schema"


def _listing(store: Store) -> tuple[list[str], list[str]]:
    page, _ = store.list_memories(AGENT, "", after=None, limit=100)
    with store.index.read() as conn:
        texts = [
            r[0]
            for r in conn.execute(
                "SELECT listing FROM memories WHERE agent_id=? ORDER BY path", (AGENT,)
            )
        ]
    return [m.path for m in page], texts


def _edges(store: Store) -> list[dict[str, object]]:
    pages = {"edges": inspect.Page(500, None)}
    target = inspect.Target("agent", AGENT)
    body = inspect.inspect(store, target, pages, None, Signer(b"k" * 32))
    edges: list[dict[str, object]] = body["graph"]["edges"]
    return edges


def _log(store: Store, *, heads: bool) -> list[dict[str, object]]:
    pages = {"log": inspect.Page(200, None)}
    target = inspect.Target("agent", AGENT)
    body = inspect.inspect(store, target, pages, None, Signer(b"k" * 32), heads=heads)
    steps: list[dict[str, object]] = body["log"]["steps"]
    return steps


@pytest.mark.parametrize("schema", sorted(OLDER))
def test_an_index_of_an_older_schema_is_migrated_when_opened(tmp_path: Path, schema: int) -> None:
    data = tmp_path / "data"
    store = Store(data)
    store.create_agent(AGENT, None)
    bulk = [Put(f"/memories/bulk/{i:02}.md", b"x\n") for i in range(LOG_HEAD + 5)]
    store.apply(AGENT, bulk, actor="t", message="bulk")
    store.apply(AGENT, [Delete(op.path) for op in bulk], actor="t", message="unbulk")
    for name in ("b.md", "a.md", "notes/c.md"):
        text = f"---\ndescription: {name}\n---\nthe body of zebra{name[0]}\n"
        text += "see [[a]], [b](../b.md) and [[gone]]\n"
        store.write(AGENT, f"/memories/{name}", text.encode(), actor="t")
    store.write(AGENT, "/memories/a.md", b"now [[notes/c]] only\n", actor="t")
    before = _listing(store)
    edges = _edges(store)
    assert len(edges) == 2 + 2 + 3 + 1  # "../b.md" from /memories is above the root
    before_stats = store.agent_stats(AGENT)
    log, heads = _log(store, heads=False), _log(store, heads=True)
    with store.index.read() as conn:
        cached = conn.execute("SELECT agent_id, sha256, content FROM blobs ORDER BY 1, 2").fetchall()
    assert heads[0]["changeCount"] == LOG_HEAD + 5 and len(heads[0]["changes"]) == LOG_HEAD
    with store.index.write() as conn:
        OLDER[schema](conn)
        conn.execute("UPDATE meta SET value=? WHERE key='schema'", (schema,))
    store.close()

    reopened = Store(data)
    try:
        assert not reopened.index.created  # upgraded in place, not rebuilt from the log
        with reopened.index.read() as conn:
            found = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            assert found == (index.SCHEMA_VERSION,)
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            blobs = conn.execute("SELECT agent_id, sha256, content FROM blobs ORDER BY 1, 2")
            assert blobs.fetchall() == cached  # every cached content kept
            (blobs_sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name='blobs'").fetchone()
        assert "WITHOUT ROWID" not in blobs_sql  # schema 9: a read seeks its content by rowid
        assert reopened.read(AGENT, "/memories/a.md").content == b"now [[notes/c]] only\n"
        assert "damage" in tables
        assert _listing(reopened) == before
        assert _edges(reopened) == edges  # the links table filled from the versions
        assert _log(reopened, heads=False) == log  # every change, as before
        assert _log(reopened, heads=True) == heads  # counts and first changes filled
        assert reopened.agent_stats(AGENT) == (3, before_stats[1])  # counted when migrated
        # Memories written before the full-text index existed are found by their words.
        found_by_body = search(reopened, Signer(b"k" * 32), agent_id=AGENT, query="zebran")
        assert [h.path for h in found_by_body.results] == ["/memories/notes/c.md"]
        reopened.write(AGENT, "/memories/d.md", b"new zebrad\n", actor="t")
        found_new = search(reopened, Signer(b"k" * 32), agent_id=AGENT, query="zebrad")
        assert [h.path for h in found_new.results] == ["/memories/d.md"]  # flushed
        assert [m.path for m in reopened.list_memories(AGENT, "", after=None, limit=100)[0]] == [
            "/memories/a.md",
            "/memories/b.md",
            "/memories/d.md",
            "/memories/notes/c.md",
        ]
        assert reopened.agent_stats(AGENT) == (4, before_stats[1] + len(b"new zebrad\n"))
    finally:
        reopened.close()
