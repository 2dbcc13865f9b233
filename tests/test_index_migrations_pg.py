"""The PostgreSQL index migrates an older schema in place, step by named step, when a
server opens it (as tests/test_index_migrations.py does for SQLite), and refuses a
schema it does not know rather than dropping what a newer memfs wrote."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

import psycopg
import pytest

from memfs.derived.index.postgres import IndexUnreachable, PostgresIndex
from memfs.derived.index.postgres.schema import MIGRATIONS
from memfs.derived.index.schema import SCHEMA_VERSION
from memfs.domain.commits import CREATED, LOG_HEAD, Change, Commit

AGENT = "alice"
BULK = "bulk"


def _schema_8(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Schema 9's step (blobs_rowid) is the SQLite index's: the same shape here."""


def _schema_7(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Schema 8's step (search_pending) is the SQLite index's: the same shape here."""
    _schema_8(conn)


def _schema_6(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Before commits rows kept their change count and first changes (the console's log)."""
    _schema_7(conn)
    conn.execute("ALTER TABLE commits DROP COLUMN change_count, DROP COLUMN head_changes")


def _schema_5(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Before the links table of inspect's graph edges."""
    _schema_6(conn)
    conn.execute("DROP TABLE links")


def _schema_4(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Before accents were folded in Python: no folded copies, and a dictionary ahead
    of the stemmer (unaccent then; ``simple`` stands in, as pgserver's build has none)."""
    conn.execute(
        "ALTER TABLE search_docs DROP COLUMN path_words, DROP COLUMN folded_path_words,"
        " DROP COLUMN folded_description, DROP COLUMN folded_body"
    )
    conn.execute(
        "ALTER TEXT SEARCH CONFIGURATION memfs_search ALTER MAPPING FOR asciiword, word"
        " WITH simple, memfs_english"
    )
    _schema_5(conn)


def _schema_3(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Before agents rows kept their memories' count and bytes."""
    _schema_4(conn)
    conn.execute("ALTER TABLE agents DROP COLUMN memory_count")
    conn.execute("ALTER TABLE agents DROP COLUMN memory_bytes")


def _schema_2(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Before full-text search: no search table, no text search configuration."""
    _schema_3(conn)
    conn.execute("DROP TABLE search_docs")
    conn.execute("DROP TEXT SEARCH CONFIGURATION memfs_search")
    conn.execute("DROP TEXT SEARCH DICTIONARY memfs_english")


def _schema_1(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Before rows kept their listing JSON, and before the damage table."""
    _schema_2(conn)
    conn.execute("ALTER TABLE memories DROP COLUMN listing")
    conn.execute("DROP TABLE damage")


OLDER: dict[int, Callable[[psycopg.Connection[tuple[object, ...]]], None]] = {
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
    assert [m.source for m in MIGRATIONS] == list(range(1, SCHEMA_VERSION))
    assert len({m.name for m in MIGRATIONS}) == len(MIGRATIONS)
    assert set(OLDER) == set(range(1, SCHEMA_VERSION)), "a fixture per older schema"


def _fill(idx: PostgresIndex) -> None:
    with idx.write_session() as s:
        s.put_agent(AGENT, "Alice", "store-1", 5)
        for revision, name in enumerate(("b.md", "a.md", "notes/c.md"), start=1):
            data = f"---\ndescription: {name}\n---\n[[a]] and [x](c.md)\n".encode()
            sha = hashlib.sha256(data).hexdigest()
            change = Change(
                f"/memories/{name}",
                CREATED,
                1,
                None,
                sha,
                len(data),
                content=data.decode(),
                description=name,
            )
            commit = Commit(AGENT, revision, revision * 1000, "t", "m", (change,))
            s.apply_commit(commit, revision * 1000, {sha: data}, commit.to_bytes())
        # A bulk commit of another agent: more changes than its row keeps apart.
        s.put_agent(BULK, "Bulk", "store-1", 5)
        sha = hashlib.sha256(b"x").hexdigest()
        changes = tuple(
            Change(f"/memories/{i:02}.md", CREATED, 1, None, sha, 1, content="x")
            for i in range(LOG_HEAD + 5)
        )
        commit = Commit(BULK, 1, 9_000, "t", "bulk", changes)
        s.apply_commit(commit, 9_000, {sha: b"x"}, commit.to_bytes())


Listing = tuple[bytes, list[str], list[tuple[object, ...]], list[list[tuple[object, ...]]]]


def _listing(idx: PostgresIndex) -> Listing:
    with idx.read_session() as s:
        page = s.list_memories_json(AGENT, "", after=None, limit=100, depth_one=False)
        rows = sorted(r[6] for r in s.live_rows(AGENT))
        links = s.link_rows(("", "", 0, -1), AGENT + "\x00", 1 << 62, 100)
        log = [
            s.step_rows("agent", BULK, (-1, -1), 1 << 62, 10, commits=True, heads=heads)
            for heads in (False, True)
        ]
    return page.memories, rows, links, log


@pytest.mark.parametrize("schema", sorted(OLDER))
def test_an_index_of_an_older_schema_is_migrated_when_opened(
    postgres_url: str, schema: int
) -> None:
    idx = PostgresIndex(postgres_url, pool_size=2)
    _fill(idx)
    before = _listing(idx)
    assert len(before[2]) == 6  # two links in each of three versions
    full, heads = before[3]
    assert [r[11] for r in heads] == [LOG_HEAD + 5]  # the change count
    assert len(json.loads(str(heads[0][8]))) == LOG_HEAD
    assert json.loads(str(heads[0][8])) == json.loads(str(full[0][8]))[:LOG_HEAD]
    with idx.read_session() as s:
        before_stats = s.agent_stats(AGENT)
    assert before_stats[0] == 3
    idx.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        OLDER[schema](conn)
        conn.execute("UPDATE meta SET value=%s WHERE key='schema'", (schema,))

    reopened = PostgresIndex(postgres_url, pool_size=2)
    try:
        assert not reopened.created  # upgraded in place, not rebuilt from the log
        with reopened.read_session() as s:
            assert s.schema() == SCHEMA_VERSION
            assert s.damaged_agents() == []  # the damage table is back
        assert _listing(reopened) == before
        with reopened.read_session() as s:
            assert s.agent_stats(AGENT) == before_stats  # counted when migrated
    finally:
        reopened.close()


def test_a_schema_newer_than_this_memfs_is_refused_and_kept(postgres_url: str) -> None:
    PostgresIndex(postgres_url, pool_size=2).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value=99 WHERE key='schema'")
    with pytest.raises(IndexUnreachable, match="has schema 99"):
        PostgresIndex(postgres_url, pool_size=2)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone() == (99,)
        assert conn.execute("SELECT COUNT(*) FROM agents").fetchone() == (0,)
