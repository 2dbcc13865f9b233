"""Reading the index: agents, memories, versions, commits and the listings."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

from memfs.derived.index.rows import (
    _AFTER_SLASH,
    _MEMORY_COLUMNS,
    _MEMORY_READ,
    _VERSION_SELECT,
    AgentRow,
    CommitRow,
    FolderEntry,
    ListingJson,
    MemoryRead,
    MemoryRow,
    PathState,
    VersionRow,
    _memory,
    _memory_read,
    _version,
)
from memfs.domain.records import PlanHead


def damaged_agents(conn: sqlite3.Connection) -> list[tuple[str, str, str]]:
    return [(str(a), str(f), str(r)) for a, f, r in conn.execute("SELECT * FROM damage")]


def agent(conn: sqlite3.Connection, agent_id: str) -> AgentRow | None:
    row = conn.execute(
        "SELECT agent_id, name, store_id, created_at, revision, last_ts FROM agents "
        "WHERE agent_id=?",
        (agent_id,),
    ).fetchone()
    return AgentRow(*row) if row else None


# The agent's row, its damage and the clock: one row whatever exists (a commit's
# planning needed three statements for them).
_AGENT_HEAD = (
    "SELECT a.agent_id, a.name, a.store_id, a.created_at, a.revision, a.last_ts,"
    " d.file, d.reason, MAX(COALESCE(m.value, 0),"
    " COALESCE((SELECT MAX(visible_at) FROM commits), 0)) FROM (SELECT 1) one"
    " LEFT JOIN agents a ON a.agent_id=?1 LEFT JOIN damage d ON d.agent_id=?1"
    " LEFT JOIN meta m ON m.key='clock'"
)


def agent_and_damage(
    conn: sqlite3.Connection, agent_id: str
) -> tuple[AgentRow | None, tuple[str, str] | None]:
    """(the agent's row, its damage as (file, reason)) in one statement, without the
    clock ``agent_head`` also reads (a retried delivery asks at each retry)."""
    row = conn.execute(_AGENT_AND_DAMAGE, (agent_id,)).fetchone()
    damage = (str(row[6]), str(row[7])) if row[6] is not None else None
    return (AgentRow(*row[:6]) if row[0] is not None else None), damage


_AGENT_AND_DAMAGE = (
    "SELECT a.agent_id, a.name, a.store_id, a.created_at, a.revision, a.last_ts,"
    " d.file, d.reason FROM (SELECT 1) one"
    " LEFT JOIN agents a ON a.agent_id=?1 LEFT JOIN damage d ON d.agent_id=?1"
)


def agent_head(
    conn: sqlite3.Connection, agent_id: str
) -> tuple[AgentRow | None, tuple[str, str] | None, int]:
    """(the agent's row, its damage as (file, reason), the clock) in one statement."""
    row = conn.execute(_AGENT_HEAD, (agent_id,)).fetchone()
    damage = (str(row[6]), str(row[7])) if row[6] is not None else None
    found = AgentRow(*row[:6]) if row[0] is not None else None
    return found, damage, int(row[8]) if row[8] is not None else 0


def agents(conn: sqlite3.Connection, prefix: str, after: str | None, limit: int) -> list[AgentRow]:
    lower, op = (after, ">") if after is not None and after >= prefix else (prefix, ">=")
    rows = conn.execute(
        "SELECT agent_id, name, store_id, created_at, revision, last_ts FROM agents "
        f"WHERE agent_id {op} ? AND agent_id < ? ORDER BY agent_id LIMIT ?",
        (lower, prefix + "\U0010ffff", limit),
    ).fetchall()
    return [AgentRow(*r) for r in rows]


def agent_stats(conn: sqlite3.Connection, agent_id: str) -> tuple[int, int]:
    """(count, total bytes) of the agent's live memories, as its commits kept them."""
    row = conn.execute(
        "SELECT memory_count, memory_bytes FROM agents WHERE agent_id=?", (agent_id,)
    ).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def ever_written(conn: sqlite3.Connection, agent_id: str) -> bool:
    """Whether any commit of the agent changed a memory (a rename of the agent does not)."""
    row = conn.execute("SELECT 1 FROM versions WHERE agent_id=? LIMIT 1", (agent_id,)).fetchone()
    return row is not None


def memory(conn: sqlite3.Connection, agent_id: str, path: str) -> MemoryRow | None:
    row = conn.execute(
        f"SELECT {_MEMORY_COLUMNS} FROM memories WHERE agent_id=? AND path=?",
        (agent_id, path),
    ).fetchone()
    return _memory(row) if row else None


def memory_read(conn: sqlite3.Connection, agent_id: str, path: str) -> MemoryRead | None:
    """Store.read's lookups in one statement; None if the agent does not exist."""
    row = conn.execute(_MEMORY_READ, (path, agent_id)).fetchone()
    return _memory_read(path, row) if row else None


def is_folder(conn: sqlite3.Connection, agent_id: str, path: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM memories WHERE agent_id=? AND path>? AND path<? LIMIT 1",
        (agent_id, path + "/", path + _AFTER_SLASH),
    ).fetchone()
    return row is not None


def live_paths(conn: sqlite3.Connection, agent_id: str, candidates: Sequence[str]) -> set[str]:
    """Which of ``candidates`` are live memories (one query for all)."""
    if not candidates:
        return set()
    marks = ",".join("?" * len(candidates))
    rows = conn.execute(
        f"SELECT path FROM memories WHERE agent_id=? AND path IN ({marks})",
        (agent_id, *candidates),
    )
    return {str(row[0]) for row in rows}


def last_version(conn: sqlite3.Connection, agent_id: str, path: str) -> int:
    row = conn.execute(
        "SELECT MAX(version) FROM versions WHERE agent_id=? AND path=?", (agent_id, path)
    ).fetchone()
    return int(row[0] or 0)


def blob(conn: sqlite3.Connection, agent_id: str, sha256: str) -> bytes | None:
    row = conn.execute(
        "SELECT content FROM blobs WHERE agent_id=? AND sha256=?", (agent_id, sha256)
    ).fetchone()
    return bytes(row[0]) if row else None


def version(conn: sqlite3.Connection, agent_id: str, path: str, number: int) -> VersionRow | None:
    row = conn.execute(
        _VERSION_SELECT + "WHERE v.agent_id=? AND v.path=? AND v.version=?",
        (agent_id, path, number),
    ).fetchone()
    return _version(row) if row else None


def versions(
    conn: sqlite3.Connection, agent_id: str, path: str, after: int, limit: int
) -> list[VersionRow]:
    rows = conn.execute(
        _VERSION_SELECT
        + "WHERE v.agent_id=? AND v.path=? AND v.version>? ORDER BY v.version LIMIT ?",
        (agent_id, path, after, limit),
    ).fetchall()
    return [_version(r) for r in rows]


def commits(
    conn: sqlite3.Connection,
    agent_id: str,
    *,
    before: int | None,
    limit: int,
    path: str | None = None,
) -> list[CommitRow]:
    """Commits newest first (like ``git log``), optionally only those touching ``path``."""
    upper = before if before is not None else 1 << 62
    if path is None:
        rows = conn.execute(
            "SELECT revision, ts, visible_at, actor, message, changes FROM commits "
            "WHERE agent_id=? AND revision<? ORDER BY revision DESC LIMIT ?",
            (agent_id, upper, limit),
        ).fetchall()
    else:
        rows = conn.execute(
            "SELECT c.revision, c.ts, c.visible_at, c.actor, c.message, c.changes "
            "FROM versions v JOIN commits c ON c.agent_id=v.agent_id AND c.revision=v.revision "
            "WHERE v.agent_id=? AND v.path=? AND v.revision<? ORDER BY v.revision DESC LIMIT ?",
            (agent_id, path, upper, limit),
        ).fetchall()
    return [CommitRow(r[0], r[1], r[2], r[3], r[4], json.loads(r[5])) for r in rows]


def list_memories(
    conn: sqlite3.Connection,
    agent_id: str,
    folder: str,
    *,
    after: str | None,
    limit: int,
    depth_one: bool,
    filters: Sequence[tuple[str, str]] = (),
) -> tuple[list[MemoryRow | FolderEntry], bool]:
    """One page of a folder in path order; True when more entries follow.

    ``after`` is the last entry of the previous page: a memory path, or a folder path
    with a trailing ``/``. With ``depth_one`` subfolders appear as FolderEntry items,
    each found with one index seek however many memories it holds.
    """
    rows, more = _walk(
        conn,
        agent_id,
        folder,
        _MEMORY_COLUMNS,
        after=after,
        limit=limit,
        depth_one=depth_one,
        filters=filters,
    )
    return [r if isinstance(r, FolderEntry) else _memory(r) for r in rows], more


def _listing_where(
    agent_id: str,
    folder: str,
    after: str | None,
    filters: Sequence[tuple[str, str]],
    *,
    through: str | None = None,
) -> tuple[str, list[object], bool]:
    """The keyset range of a listing: a WHERE with ``{}`` for the lower bound's
    operator, its parameters (the lower bound is ``params[1]``), and whether the lower
    bound is inclusive. The range ends with the folder, or at ``through`` (included):
    one bound, so that SQLite stops the scan there rather than filtering past it."""
    upper = folder + _AFTER_SLASH
    if after is None:
        lower, inclusive = folder + "/", False
    elif after.endswith("/"):
        lower, inclusive = after[:-1] + _AFTER_SLASH, True
    else:
        lower, inclusive = after, False
    if lower < folder + "/":  # a cursor before the folder must not widen the listing
        lower, inclusive = folder + "/", False
    where = "agent_id=? AND path{} ? AND path" + ("<=?" if through is not None else "<?")
    params: list[object] = [agent_id, lower, upper if through is None else through]
    for key, value in filters:
        where += (
            " AND EXISTS(SELECT 1 FROM memory_meta m WHERE m.agent_id=memories.agent_id"
            " AND m.path=memories.path AND m.key=? AND m.value=?)"
        )
        params += [key, value]
    return where, params, inclusive


def _walk(
    conn: sqlite3.Connection,
    agent_id: str,
    folder: str,
    columns: str,
    *,
    after: str | None,
    limit: int,
    depth_one: bool,
    filters: Sequence[tuple[str, str]],
) -> tuple[list[Sequence[object] | FolderEntry], bool]:
    """The walk of ``list_memories``: each memory as its row of ``columns`` (path first)."""
    where, params, inclusive = _listing_where(agent_id, folder, after, filters)
    out: list[Sequence[object] | FolderEntry] = []
    want = limit + 1
    while len(out) < want:
        sql = (
            f"SELECT {columns} FROM memories WHERE "
            + where.format(">=" if inclusive else ">")
            + " ORDER BY path LIMIT ?"
        )
        asked = want - len(out)
        # Rows are fetched lazily: a depth-one jump uses only the first row of a query,
        # and fetching all ``asked`` rows made a page of N subfolders cost N x limit rows.
        rows = conn.execute(sql, (*params, asked))
        fetched = 0
        jumped = False
        for row in rows:
            fetched += 1
            path = str(row[0])
            rest = path[len(folder) + 1 :]
            if depth_one and "/" in rest:
                sub = folder + "/" + rest.split("/", 1)[0]
                out.append(FolderEntry(sub))
                params[1], inclusive, jumped = sub + _AFTER_SLASH, True, True
                break
            out.append(row)
            params[1], inclusive = path, False
            if len(out) >= want:
                break
        rows.close()
        if not jumped and fetched < asked:
            break
    return out[:limit], len(out) > limit


def list_memories_json(
    conn: sqlite3.Connection,
    agent_id: str,
    folder: str,
    *,
    after: str | None,
    limit: int,
    depth_one: bool,
    filters: Sequence[tuple[str, str]] = (),
) -> ListingJson:
    """The page ``list_memories`` answers, as the stored listing JSON of its memories
    (``listing_text``): no Python object per memory."""
    if depth_one:
        rows, more = _walk(
            conn,
            agent_id,
            folder,
            "path, CAST(listing AS BLOB)",
            after=after,
            limit=limit,
            depth_one=True,
            filters=filters,
        )
        texts: list[bytes] = []
        folders: list[str] = []
        for row in rows:
            if isinstance(row, FolderEntry):
                folders.append(row.path)
            else:
                text = row[1]
                assert isinstance(text, bytes)
                texts.append(text)
        last = None
        if rows:
            end = rows[-1]
            last = end.path + "/" if isinstance(end, FolderEntry) else str(end[0])
        return ListingJson(b",".join(texts), folders, last, more)
    # Recursive: first the page's last path and the one after it (a walk over the keys
    # alone), then the page's listings joined by SQLite as UTF-8 bytes over exactly that
    # range. group_concat visits the rows in the order of the primary-key range scan,
    # i.e. by path (tests/test_http_listing.py checks every page byte for byte); the
    # earlier one-statement form (a subquery with ORDER BY ... LIMIT) copied each row
    # through the subquery and cost about 1.7x as much.
    where, params, inclusive = _listing_where(agent_id, folder, after, filters)
    lower = where.format(">=" if inclusive else ">")
    ends = conn.execute(
        f"SELECT path FROM memories WHERE {lower} ORDER BY path LIMIT 2 OFFSET ?",
        (*params, max(limit, 1) - 1),
    ).fetchall()
    if ends:
        last = str(ends[0][0])
        page, page_params, _ = _listing_where(agent_id, folder, after, filters, through=last)
        row = conn.execute(
            "SELECT CAST(group_concat(listing, ',') AS BLOB) FROM memories"
            f" WHERE {page.format('>=' if inclusive else '>')}",
            page_params,
        ).fetchone()
        return ListingJson(bytes(row[0] or b""), [], last, len(ends) == 2)
    row = conn.execute(  # fewer than ``limit`` left: the rest of the range
        f"SELECT CAST(group_concat(listing, ',') AS BLOB), max(path) FROM memories WHERE {lower}",
        params,
    ).fetchone()
    return ListingJson(bytes(row[0] or b""), [], None if row[1] is None else str(row[1]), False)


def count_memories(
    conn: sqlite3.Connection,
    agent_id: str,
    folder: str,
    *,
    depth_one: bool,
    filters: Sequence[tuple[str, str]] = (),
) -> int:
    if depth_one:
        total, after = 0, None
        while True:
            page, more = list_memories(
                conn, agent_id, folder, after=after, limit=1000, depth_one=True, filters=filters
            )
            total += len(page)
            if not more:
                return total
            last = page[-1]
            after = last.path + "/" if isinstance(last, FolderEntry) else last.path
    where = "agent_id=? AND path>? AND path<?"
    params: list[object] = [agent_id, folder + "/", folder + _AFTER_SLASH]
    for key, value in filters:
        where += (
            " AND EXISTS(SELECT 1 FROM memory_meta m WHERE m.agent_id=memories.agent_id"
            " AND m.path=memories.path AND m.key=? AND m.value=?)"
        )
        params += [key, value]
    row = conn.execute(f"SELECT COUNT(*) FROM memories WHERE {where}", params).fetchone()
    return int(row[0])


def schema(conn: sqlite3.Connection) -> int | None:
    """The schema version the file says it has (None: not written yet)."""
    row = conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
    return None if row is None else int(row[0])


def agent_ids(conn: sqlite3.Connection) -> set[str]:
    return {str(row[0]) for row in conn.execute("SELECT agent_id FROM agents")}


def agent_heads(conn: sqlite3.Connection) -> list[tuple[str, int]]:
    """(agent id, indexed revision) of every agent."""
    rows = conn.execute("SELECT agent_id, revision FROM agents").fetchall()
    return [(str(a), int(r)) for a, r in rows]


def first_revision_with(conn: sqlite3.Connection, agent_id: str, sha256: str) -> int | None:
    """The first revision that wrote content ``sha256`` (whose log entry holds it inline)."""
    found = conn.execute(
        "SELECT MIN(revision) FROM versions WHERE agent_id=? AND sha256=?",
        (agent_id, sha256),
    ).fetchone()
    return int(found[0]) if found and found[0] else None


def live_contents(conn: sqlite3.Connection, agent_id: str) -> list[tuple[str, str]]:
    """(path, sha256) of every live memory of an agent."""
    rows = conn.execute(
        "SELECT path, sha256 FROM memories WHERE agent_id=?", (agent_id,)
    ).fetchall()
    return [(str(p), str(s)) for p, s in rows]


def live_rows(conn: sqlite3.Connection, agent_id: str) -> list[tuple[Any, ...]]:
    """Every live memory as (path, sha256, bytes, description, version, updated_at,
    listing): what fsck compares with the log and with the stored listing JSON."""
    return conn.execute(
        "SELECT path, sha256, bytes, description, version, updated_at, listing"
        " FROM memories WHERE agent_id=?",
        (agent_id,),
    ).fetchall()


def cached_blobs(conn: sqlite3.Connection, agent_id: str) -> list[tuple[str, bytes]]:
    """(sha256, content) of every content the index caches for an agent."""
    rows = conn.execute("SELECT sha256, content FROM blobs WHERE agent_id=?", (agent_id,))
    return [(str(sha), bytes(data)) for sha, data in rows]


def commit_revisions(conn: sqlite3.Connection, agent_id: str) -> list[int]:
    rows = conn.execute("SELECT revision FROM commits WHERE agent_id=?", (agent_id,))
    return [int(revision) for (revision,) in rows]


def commit_entry(
    conn: sqlite3.Connection, agent_id: str, revision: int
) -> tuple[int, str, str, str] | None:
    """(ts, actor, message, changes JSON) of one commit row, or None."""
    row = conn.execute(
        "SELECT ts, actor, message, changes FROM commits WHERE agent_id=? AND revision=?",
        (agent_id, revision),
    ).fetchone()
    return None if row is None else (int(row[0]), str(row[1]), str(row[2]), str(row[3]))


def has_version_larger_than(
    conn: sqlite3.Connection, agent_id: str, sha256: str, size: int
) -> bool:
    """True if some version of the agent holds ``sha256`` with more than ``size`` bytes."""
    row = conn.execute(
        "SELECT 1 FROM versions WHERE agent_id=? AND sha256=? AND bytes>? LIMIT 1",
        (agent_id, sha256, size),
    ).fetchone()
    return row is not None


def runs_by_status(conn: sqlite3.Connection) -> dict[str, int]:
    rows = conn.execute("SELECT status, COUNT(*) FROM runs GROUP BY status").fetchall()
    return {str(status): int(count) for status, count in rows}


# Paths per statement: well under SQLite's oldest bound-parameter limit (999).
_STATES_BATCH = 900
_STATES_COLUMNS = ", ".join("m." + c for c in _MEMORY_COLUMNS.split(", "))


def path_states(
    conn: sqlite3.Connection, agent_id: str, paths: Sequence[str]
) -> dict[str, PathState]:
    """Each of ``paths``' state (live memory, newest version, folder or not) in one
    query per 900 paths, rather than three questions per path."""
    wanted = list(dict.fromkeys(paths))
    states: dict[str, PathState] = {}
    for start in range(0, len(wanted), _STATES_BATCH):
        chunk = wanted[start : start + _STATES_BATCH]
        values = ", ".join(["(?)"] * len(chunk))
        rows = conn.execute(
            f"WITH p(path) AS (VALUES {values})"
            " SELECT p.path,"
            " (SELECT MAX(version) FROM versions v WHERE v.agent_id=? AND v.path=p.path),"
            " EXISTS (SELECT 1 FROM memories f WHERE f.agent_id=? AND f.path>p.path || '/'"
            " AND f.path<p.path || ?),"
            f" {_STATES_COLUMNS}"
            " FROM p LEFT JOIN memories m ON m.agent_id=? AND m.path=p.path",
            (*chunk, agent_id, agent_id, _AFTER_SLASH, agent_id),
        )
        for row in rows:
            live = _memory(row[3:]) if row[3] is not None else None
            states[str(row[0])] = PathState(live, int(row[1] or 0), bool(row[2]))
    return states


# A commit's planning read in one statement (``plan_head``): the agent's head
# (``_AGENT_HEAD``'s columns), then one row per path, as ``path_states`` reads them. It
# was BEGIN, the head, the states and COMMIT: in autocommit, one statement is one
# snapshot. With no path, the one row has a NULL path.
_PLAN_HEAD = (
    "WITH p(path) AS (VALUES {values})"
    " SELECT a.agent_id, a.name, a.store_id, a.created_at, a.revision, a.last_ts,"
    " d.file, d.reason, MAX(COALESCE(c.value, 0),"
    " COALESCE((SELECT MAX(visible_at) FROM commits), 0)), p.path,"
    " (SELECT MAX(version) FROM versions v WHERE v.agent_id=?1 AND v.path=p.path),"
    " EXISTS (SELECT 1 FROM memories f WHERE f.agent_id=?1 AND f.path>p.path || '/'"
    f" AND f.path<p.path || '{_AFTER_SLASH}'),"
    f" {_STATES_COLUMNS}"
    " FROM (SELECT 1) one LEFT JOIN agents a ON a.agent_id=?1"
    " LEFT JOIN damage d ON d.agent_id=?1 LEFT JOIN meta c ON c.key='clock'"
    " LEFT JOIN p ON 1 LEFT JOIN memories m ON m.agent_id=?1 AND m.path=p.path"
)
_PLAN_HEADS: dict[int, str] = {}  # the statement's text by path count


def plan_head(conn: sqlite3.Connection, agent_id: str, paths: Sequence[str]) -> PlanHead:
    """``agent_head`` and ``path_states`` from one snapshot: one statement for up to
    ``_STATES_BATCH`` paths; more take a transaction of their own (unless the caller
    is in one already), the first batch with the head."""
    wanted = list(dict.fromkeys(paths))
    first, rest = wanted[:_STATES_BATCH], wanted[_STATES_BATCH:]
    sql = _PLAN_HEADS.get(len(first))
    if sql is None:
        values = ", ".join(f"(?{i + 2})" for i in range(len(first))) or "(NULL)"
        sql = _PLAN_HEADS[len(first)] = _PLAN_HEAD.format(values=values)
    own = bool(rest) and not conn.in_transaction
    if own:
        conn.execute("BEGIN")
    try:
        rows = conn.execute(sql, (agent_id, *first)).fetchall()
        states = path_states(conn, agent_id, rest) if rest else {}
    finally:
        if own:
            conn.execute("COMMIT")
    head = rows[0]
    damage = (str(head[6]), str(head[7])) if head[6] is not None else None
    found = AgentRow(*head[:6]) if head[0] is not None else None
    for row in rows:
        if row[9] is not None:
            live = _memory(row[12:]) if row[12] is not None else None
            states[row[9]] = PathState(live, row[10] or 0, bool(row[11]))
    return PlanHead(found, damage, int(head[8]) if head[8] is not None else 0, states)


class PathStates:
    """The planner's reads of one agent (core.planner.States), answered from the index
    inside the caller's transaction; ``content`` reads a checked content."""

    def __init__(
        self, conn: sqlite3.Connection, agent_id: str, content: Callable[[str], bytes]
    ) -> None:
        self.conn, self.agent_id, self.content = conn, agent_id, content

    def path_states(self, paths: Sequence[str]) -> dict[str, PathState]:
        return path_states(self.conn, self.agent_id, paths)
