"""Writing the index: commits applied live (whole logs: bulk.py), agents, damage, the clock."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable

from memfs.derived.index import search
from memfs.derived.index.links import add_links, link_rows
from memfs.derived.index.rows import (
    commit_changes,
    live_delta,
    memory_row,
    metadata_json,
    version_row,
)
from memfs.derived.index.schema import DERIVED_TABLES
from memfs.domain.commits import Commit
from memfs.domain.content import metadata_text

# The clock: the newest commit's visibility (commits_by_visibility answers it with one
# seek) or the meta row, whichever is later. A commit moves it by its own row, not by
# rewriting the meta row (one hot page less per commit); the meta row holds what no
# commit row does (a pin, a run step, a clock kept across a rebuild), and is raised
# before commit rows are deleted, so the clock never moves back.
_CLOCK = (
    "SELECT MAX(COALESCE((SELECT value FROM meta WHERE key='clock'), 0),"
    " COALESCE((SELECT MAX(visible_at) FROM commits), 0))"
)


def clock(conn: sqlite3.Connection) -> int:
    return int(conn.execute(_CLOCK).fetchone()[0])


def _keep_clock(conn: sqlite3.Connection) -> None:
    """Before commit rows are deleted: the meta row takes the clock they made."""
    raise_clock(conn, clock(conn))


def put_agent(
    conn: sqlite3.Connection, agent_id: str, name: str, store_id: str, created_at: int
) -> None:
    conn.execute(
        "INSERT OR IGNORE INTO agents(agent_id, name, store_id, created_at) VALUES(?,?,?,?)",
        (agent_id, name, store_id, created_at),
    )


def drop_agent(conn: sqlite3.Connection, agent_id: str, *, runs: bool = True) -> None:
    """Forget an agent (``runs=False``: keep its runs, which reindex rescans apart)."""
    _keep_clock(conn)
    search.drop_docs(conn, agent_id)
    for table in DERIVED_TABLES:
        if runs or table not in ("runs", "run_steps"):
            conn.execute(f"DELETE FROM {table} WHERE agent_id=?", (agent_id,))


# A live commit's row: the changes columns come from rows.commit_changes.
_INSERT_LIVE_COMMIT = "INSERT OR IGNORE INTO commits VALUES(?,?,?,?,?,?,?,?,?)"


_UNCOUNT = (
    "UPDATE agents SET (memory_count, memory_bytes)=(SELECT agents.memory_count-COUNT(*),"
    " agents.memory_bytes-COALESCE(SUM(bytes), 0) FROM memories"
    " WHERE agent_id=? AND path IN (SELECT value FROM json_each(?))) WHERE agent_id=?"
)


# The agent's next commit's row, made visible at its own timestamp: only when the
# agent's row is the one it was planned on (that store, the revision before) and the
# clock (``_CLOCK``) is still before that timestamp; else its visible_at is NULL and
# the row is skipped (OR IGNORE), for the caller to read the agent's row and decide.
# The write transaction's read of the agent's row, folded in. A scalar subquery in
# VALUES, not INSERT … SELECT, and no RETURNING: each of those cost SQLite about
# 24,000 instructions more (cachegrind, docs/benchmarks.md).
_INSERT_NEXT_COMMIT = (
    "INSERT OR IGNORE INTO commits VALUES(?1, ?2, ?3,"
    " (SELECT ?3 FROM agents WHERE agent_id=?1 AND store_id=?9 AND revision=?2 - 1"
    " AND ?3 > COALESCE((SELECT value FROM meta WHERE key='clock'), 0)"
    " AND ?3 > COALESCE((SELECT MAX(visible_at) FROM commits), 0)), ?4, ?5, ?6, ?7, ?8)"
)


def apply_commit(
    conn: sqlite3.Connection,
    commit: Commit,
    visible_at: int,
    contents: dict[str, bytes],
    entry: bytes,
) -> bool:
    """Record ``commit``, whose log entry is ``entry`` (idempotent); ``contents`` maps
    sha256 → bytes for the cache."""
    inserted = conn.execute(
        _INSERT_LIVE_COMMIT,
        (
            commit.agent_id,
            commit.revision,
            commit.ts,
            visible_at,
            commit.actor,
            commit.message,
            *commit_changes(commit),
        ),
    )
    if inserted.rowcount == 0:
        return False  # applied before
    _apply_rows(conn, commit, visible_at, contents)
    return True


def apply_next_commit(
    conn: sqlite3.Connection, commit: Commit, store_id: str, contents: dict[str, bytes]
) -> int | None:
    """``apply_commit`` of the agent's next revision, made visible at its timestamp,
    when the agent's row is that of store ``store_id`` at the revision before and the
    clock is before that timestamp: its visible_at, or None (nothing written): the
    caller reads the row and decides."""
    inserted = conn.execute(
        _INSERT_NEXT_COMMIT,
        (
            commit.agent_id,
            commit.revision,
            commit.ts,
            commit.actor,
            commit.message,
            *commit_changes(commit),
            store_id,
        ),
    )
    if inserted.rowcount == 0:
        return None
    _apply_rows(conn, commit, commit.ts, contents)
    return commit.ts


def _apply_rows(
    conn: sqlite3.Connection, commit: Commit, visible_at: int, contents: dict[str, bytes]
) -> None:
    """Every row of ``commit`` but its commits row (inserted by the caller)."""
    agent = commit.agent_id
    # The agent's count and bytes: the touched paths' old rows out now, their new
    # rows in with the revision below (the same transaction as the rows themselves).
    # A commit whose every change starts from nothing (creates) has no old rows. One
    # that touches each path once has, at most, the live row each change starts from
    # (``before``): its version is the one before, whose size the statement closing
    # that version hands back, so no statement of its own is needed.
    paths = {c.path for c in commit.changes}
    once = len(paths) == len(commit.changes)
    if not once and any(c.before is not None for c in commit.changes):
        touched = json.dumps(sorted(paths), ensure_ascii=False)
        conn.execute(_UNCOUNT, (agent, touched, agent))
    gone = gone_bytes = 0
    for change in commit.changes:
        if change.version > 1:
            closed = conn.execute(
                "UPDATE versions SET valid_to=?, visible_to=? "
                "WHERE agent_id=? AND path=? AND version=? RETURNING bytes",
                (commit.ts, visible_at, agent, change.path, change.version - 1),
            ).fetchone()
            if once and change.before is not None and closed is not None:
                gone += 1
                gone_bytes += closed[0]
        metadata = change.metadata
        meta_json = metadata_json(change)
        conn.execute(
            "INSERT INTO versions VALUES(?,?,?,?,?,?,?,?,?,?,NULL,?,NULL)",
            version_row(commit, change, visible_at, meta_json),
        )
        if change.before is not None:  # only a live memory has metadata rows
            conn.execute(
                "DELETE FROM memory_meta WHERE agent_id=? AND path=?", (agent, change.path)
            )
        if change.after is None:
            conn.execute("DELETE FROM memories WHERE agent_id=? AND path=?", (agent, change.path))
            search.mark(conn, agent, change.path)
            continue
        # An update keeps the memory's created_at.
        conn.execute(
            "INSERT INTO memories VALUES(?,?,?,?,?,?,?,?,?,?) ON CONFLICT(agent_id, path) DO"
            " UPDATE SET version=excluded.version, sha256=excluded.sha256,"
            " bytes=excluded.bytes, description=excluded.description,"
            " metadata=excluded.metadata, updated_at=excluded.updated_at,"
            " listing=excluded.listing",
            memory_row(commit, change, meta_json),
        )
        if metadata:
            conn.executemany(
                "INSERT OR REPLACE INTO memory_meta VALUES(?,?,?,?)",
                [(agent, change.path, k, metadata_text(v)) for k, v in metadata.items()],
            )
        if change.after in contents:
            conn.execute(
                "INSERT OR IGNORE INTO blobs VALUES(?,?,?)",
                (agent, change.after, contents[change.after]),
            )
        # A rename brings no content along: its bytes are the cached ones.
        content = contents.get(change.after)
        if content is None:
            row = conn.execute(
                "SELECT content FROM blobs WHERE agent_id=? AND sha256=?", (agent, change.after)
            ).fetchone()
            content = bytes(row[0]) if row is not None else None
        # Its full-text row is made later, many documents at a time (search.flush).
        search.mark(conn, agent, change.path)
        links = link_rows(agent, change.path, change.version, visible_at, content)
        if links:  # most memories link nowhere: no executemany of nothing
            add_links(conn, links)
    name_sql = ", name=?" if commit.agent_name is not None else ""
    count, size = live_delta(commit)
    params: list[object] = [commit.revision, commit.ts, count - gone, size - gone_bytes]
    if commit.agent_name is not None:
        params.append(commit.agent_name)
    conn.execute(
        "UPDATE agents SET revision=MAX(revision, ?), last_ts=MAX(last_ts, ?),"
        f" memory_count=memory_count+?, memory_bytes=memory_bytes+?{name_sql} "
        "WHERE agent_id=?",
        (*params, agent),
    )
    # The clock moves with the commit's own row (see _CLOCK): no meta row written.


def damage(conn: sqlite3.Connection, agent_id: str) -> tuple[str, str] | None:
    """(file, reason) of the damage found in an agent, None if it is sound."""
    row = conn.execute("SELECT file, reason FROM damage WHERE agent_id=?", (agent_id,)).fetchone()
    return (str(row[0]), str(row[1])) if row else None


def mark_damaged(conn: sqlite3.Connection, agent_id: str, file: str, reason: str) -> None:
    conn.execute("INSERT OR REPLACE INTO damage VALUES(?,?,?)", (agent_id, file, reason))


def raise_clock(conn: sqlite3.Connection, at: int) -> None:
    """Move the visibility clock forward to ``at`` (never back): the one place it moves.
    A read pinned at or before the clock never sees a commit appear under it."""
    conn.execute("UPDATE meta SET value=MAX(value, ?) WHERE key='clock'", (at,))


def clear_damage(conn: sqlite3.Connection, agent_id: str) -> None:
    conn.execute("DELETE FROM damage WHERE agent_id=?", (agent_id,))


def clear_tables(conn: sqlite3.Connection, tables: Iterable[str]) -> None:
    tables = list(tables)
    if "commits" in tables:
        _keep_clock(conn)
    for table in tables:
        if table == "search_docs":
            search.drop_docs(conn, None)
        conn.execute(f"DELETE FROM {table}")


def purge_search(conn: sqlite3.Connection) -> None:
    search.purge(conn)


def savepoint(conn: sqlite3.Connection, name: str) -> None:
    conn.execute(f'SAVEPOINT "{name}"')


def rollback_to(conn: sqlite3.Connection, name: str) -> None:
    conn.execute(f'ROLLBACK TO "{name}"')


def release(conn: sqlite3.Connection, name: str) -> None:
    conn.execute(f'RELEASE "{name}"')
